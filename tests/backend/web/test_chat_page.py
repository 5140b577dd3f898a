"""The customer chat at `/` in a real browser against the real API (uvicorn, Postgres) with the
fake model server at the HTTP boundary: a message streams its tool activity before the reply,
a reload shows the transcript again, and with no model the page says so with the cycle's progress."""

from __future__ import annotations

import datetime as dt
import re

from playwright.async_api import expect
from sqlalchemy import update

from backend import cycles
from backend.db.cycle_models import Cycle
from backend.db.engine import make_engine
from tests.backend.api.serving import ApiServer, customer_with, make_settings
from tests.backend.web.browser import browser_page, shot
from tests.fakes.openai_server import Script, text, tool_call


async def test_a_customer_sees_tool_activity_then_the_reply_and_a_reload_keeps_the_transcript(
        api: ApiServer, script: Script, tau_retail) -> None:
    user, order_id = customer_with(tau_retail, "delivered")
    reply = f"Your order {order_id} was delivered. Anything else?"
    # the reply comes 1.5 s after the tool ran, so the page must show the activity while it waits
    script.extend([tool_call("find_user_id_by_email", {"email": user["email"]}),
                   tool_call("get_order_details", {"order_id": order_id}), text(reply, delay_s=1.5)])
    steps = [f"finding your account ({user['email']})", f"looking up order {order_id}"]
    async with browser_page(390, 780) as page:
        await page.goto(api.url + "/")
        box = page.get_by_label("Your message")
        await box.fill(f"Where is my order {order_id}? I am {user['email']}")
        await box.press("Enter")
        activity = page.locator("#log .activity")
        await expect(activity).to_have_text(steps)
        assert await page.locator("#log .msg.assistant").count() == 0  # the reply has not come yet
        await expect(page.locator("#log .msg.assistant")).to_have_text("Agent said: " + reply)
        for i in range(2):  # both done: no longer "running"
            await expect(activity.nth(i)).to_have_class("activity")
        await expect(page.get_by_label("Your message")).to_have_value("")
        await shot(page, "chat")

        await page.reload()
        await expect(page.locator("#log .msg.user")).to_contain_text(f"Where is my order {order_id}?")
        await expect(page.locator("#log .activity")).to_have_text(steps)
        await expect(page.locator("#log .msg.assistant")).to_have_text("Agent said: " + reply)
        # the token stays in the tab, never in the address
        assert "token" not in page.url and order_id not in page.url


async def test_without_a_model_the_chat_says_so_with_the_cycle_progress(empty_db: str) -> None:
    engine = make_engine(empty_db, null_pool=True)
    try:
        cycle = await cycles.create_cycle(engine, "cpu-tiny", trigger="ops")
        async with engine.begin() as conn:
            await conn.execute(update(Cycle).where(Cycle.id == cycle.id).values(
                status="running", step="train", progress=0.5, eta_s=420.0, started_at=dt.datetime.now(dt.UTC)))
    finally:
        await engine.dispose()
    server = await ApiServer(make_settings(empty_db, None)).start()
    try:
        async with browser_page(390, 780) as page:
            await page.goto(server.url + "/")
            await page.get_by_label("Your message").fill("hello?")
            await page.get_by_role("button", name="Send").click()
            state = page.locator("#state")
            await expect(state).to_contain_text("not ready yet")
            await expect(page.locator("#log .msg")).to_have_count(0)  # nothing was sent
            await expect(state).to_contain_text(f"Training cycle {cycle.id}: step train (3 of 5), 50% done")
            await expect(state).to_contain_text("about 7 min left")
            await expect(page.get_by_role("progressbar", name="Training progress")).to_have_attribute("value", "50")
            await shot(page, "chat-not-ready")
    finally:
        await server.stop()


async def test_a_handed_over_conversation_says_so_and_reaches_the_ops_queue(api: ApiServer, script: Script,
                                                                            tau_retail) -> None:
    user, _ = customer_with(tau_retail, "delivered")
    script.extend([tool_call("find_user_id_by_email", {"email": user["email"]}),
                   tool_call("transfer_to_human_agents", {"summary": "wants a refund to a closed card"})])
    async with browser_page(390, 780) as page:
        await page.goto(api.url + "/")
        await page.get_by_label("Your message").fill(f"I am {user['email']}, I want a human")
        await page.get_by_role("button", name="Send").click()
        await expect(page.locator("#state")).to_contain_text("handed to a human agent")
        await expect(page.get_by_label("Your message")).to_be_disabled()
        await page.reload()  # still handed over after a reload
        await expect(page.locator("#state")).to_contain_text("handed to a human agent")

        await page.goto(api.url + "/ops")
        await page.get_by_label("Ops token").fill("ops-test-token")
        await page.get_by_role("button", name="Sign in").click()
        await page.get_by_role("button", name="Escalations").click()
        row = page.locator("tbody tr", has_text="wants a refund to a closed card")
        await expect(row).to_contain_text("open")
        await row.get_by_role("button", name="Transcript").click()
        await expect(page.get_by_label("Transcript")).to_contain_text(f"user: I am {user['email']}, I want a human")
        await shot(page, "ops-escalation")
        await page.get_by_role("button", name="Resolve…").click()
        dialog = page.get_by_role("dialog")
        await dialog.get_by_label("Note").fill("refunded by hand")
        await dialog.get_by_role("button", name="Resolve").click()
        await expect(page.locator("#flash")).to_contain_text("is now resolved")
        await expect(page.get_by_role("button", name="Resolve…")).to_be_disabled()
        await expect(page.get_by_text("Note: refunded by hand")).to_be_visible()


async def test_a_rate_limited_customer_is_told_how_long_to_wait(tau_db: str, fake_llm, script: Script) -> None:
    script.extend([text("Hello! How can I help?")])
    server = await ApiServer(make_settings(tau_db, fake_llm.url, MUARL_RATE_MESSAGES_PER_HOUR=1)).start()
    try:
        async with browser_page(390, 780) as page:
            await page.goto(server.url + "/")
            box = page.get_by_label("Your message")
            await box.fill("hi")
            await box.press("Enter")
            await expect(page.locator("#log .msg.assistant")).to_have_text("Agent said: Hello! How can I help?")
            await box.fill("are you there?")
            await box.press("Enter")
            await expect(page.locator("#state")).to_contain_text(re.compile(r"too quickly\. Please wait \d+ seconds"))
            await expect(box).to_have_value("are you there?")  # kept for the retry
            await expect(page.locator("#log .msg.user")).to_have_count(1)
    finally:
        await server.stop()
