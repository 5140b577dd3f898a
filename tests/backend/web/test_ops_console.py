"""The ops console at `/ops` in a real browser against the real API (uvicorn, Postgres, the model
registry, a fake engine at the HTTP boundary): a wrong token is refused, sign-in, the models with
their lineage and aliases, a gate report, promotion with a required reason and a confirmation step
(the champion changes, the event appears in the audit trail), roll back; cycles and the training
curves drawn from what a cycle records (the GRPO trainer's metrics.jsonl)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
from playwright.async_api import expect
from sqlalchemy import update

from backend import cycles
from backend.broker import QUEUE
from backend.db.cycle_models import Cycle
from backend.db.engine import make_engine
from backend.serving.registry import ModelRegistry
from tests.backend.api.serving import ApiServer, make_settings
from tests.backend.serving.conftest import write_model_folder
from tests.backend.serving.fake_engine import FakeEngine
from tests.backend.web.browser import browser_page, shot

OPS_TOKEN = "ops-test-token"

REPORT = {
    "passed": True,
    "checks": [{"name": "floor", "value": 0.62, "threshold": 0.5, "passed": True, "detail": "pass^1 >= floor"},
               {"name": "vs_champion", "value": 0.04, "threshold": -0.02, "passed": True, "detail": "delta"},
               {"name": "categories", "value": -0.05, "threshold": -0.1, "passed": True, "detail": "worst"}],
    "pass_hat_k": {"candidate": {"1": {"value": 0.62, "ci": [0.55, 0.69]}, "2": {"value": 0.5, "ci": [0.42, 0.58]}},
                   "champion": {"1": {"value": 0.58, "ci": [0.51, 0.65]}, "2": {"value": 0.45, "ci": [0.37, 0.53]}}},
    "categories": [{"category": "cancel", "n": 20, "candidate": 0.7, "champion": 0.65, "delta": 0.05},
                   {"category": "return", "n": 20, "candidate": 0.55, "champion": 0.6, "delta": -0.05}],
}


@pytest.fixture
async def console(empty_db: str, tmp_path: Path) -> AsyncIterator[tuple[ApiServer, ModelRegistry, dict]]:
    with FakeEngine(serves=["m-a", "m-b"]) as engine_server:
        settings = make_settings(empty_db, None, MUARL_MODEL_SERVER_URL=engine_server.url,
                                 MUARL_VAR_DIR=str(tmp_path / "var"))
        engine = make_engine(empty_db, null_pool=True)
        registry = ModelRegistry(engine)
        a = await registry.register_folder(write_model_folder(tmp_path / "a", manifest={
            "recipe": {"name": "cpu-tiny"}, "store_snapshot": "snap_a"}), actor="t", served_name="m-a", name="first")
        b = await registry.register_folder(write_model_folder(tmp_path / "b", manifest={
            "recipe": {"name": "cpu-tiny"}, "store_snapshot": "snap_b"}), actor="t", served_name="m-b",
            name="second", parent=a.id)
        await registry.record_gate_report(a.id, None, {"passed": True, "checks": REPORT["checks"][:1]}, actor="gate")
        await registry.switch_champion(a.id, actor="t", reason="the first model")
        await registry.record_gate_report(b.id, a.id, REPORT, actor="gate")
        # a finished cycle (its candidate b, with the GRPO metrics it recorded) and a running one
        done = await cycles.create_cycle(engine, "cpu-tiny", trigger="schedule")
        now = dt.datetime.now(dt.UTC)
        async with engine.begin() as conn:
            await conn.execute(update(Cycle).where(Cycle.id == done.id).values(
                status="succeeded", step="promote", candidate=b.id, champion=a.id, gate_passed=True,
                started_at=now - dt.timedelta(hours=2), finished_at=now - dt.timedelta(hours=1)))
        metrics = Path(settings.var_dir) / "cycles" / done.id / "train" / "grpo" / "candidate" / "metrics.jsonl"
        metrics.parent.mkdir(parents=True)
        metrics.write_text("".join(json.dumps({
            "step": i + 1, "reward_mean": 0.3 + 0.04 * i, "frac_all_correct": 0.1 + 0.03 * i,
            "frac_all_wrong": 0.5 - 0.04 * i, "kl": 0.001 * i, "entropy": 1.2 - 0.05 * i, "turns_mean": 6 - 0.2 * i,
        }) + "\n" for i in range(8)) + '{"step": 9, "rew')  # a step being written is skipped
        running = await cycles.create_cycle(engine, "cpu-tiny", trigger="ops")
        async with engine.begin() as conn:
            await conn.execute(update(Cycle).where(Cycle.id == running.id).values(
                status="running", step="tasks", progress=0.25, eta_s=90.0, started_at=now))
        server = await ApiServer(settings).start()
        try:
            yield server, registry, {"a": a.id, "b": b.id, "done": done.id, "running": running.id}
        finally:
            await server.stop()
            await engine.dispose()


def version_row(page, version_id: str):
    return page.locator("tbody tr").filter(has=page.locator("td:first-child code", has_text=re.compile(
        f"^{re.escape(version_id)}$")))


async def test_ops_sign_in_promote_with_a_reason_and_roll_back(console) -> None:
    server, registry, ids = console
    async with browser_page() as page:
        await page.goto(server.url + "/ops")
        await page.get_by_label("Ops token").fill("wrong")
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.locator("#flash")).to_contain_text("not accepted")
        await page.get_by_label("Ops token").fill(OPS_TOKEN)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.locator("#champion-id")).to_have_text(ids["a"])
        rows = page.locator("table tbody tr")
        await expect(rows).to_have_count(2)
        row_a, row_b = version_row(page, ids["a"]), version_row(page, ids["b"])
        await expect(row_b.locator("td").nth(4)).to_have_text(ids["a"])  # its parent
        await expect(row_b).to_contain_text("snap_b")
        await expect(row_a.locator(".tag.champion")).to_have_text("champion")
        await expect(row_b.locator(".tag")).to_have_count(0)
        assert OPS_TOKEN not in page.url
        await shot(page, "ops-models")

        await page.get_by_role("button", name=f"Details of {ids['b']}").click()
        await expect(page.get_by_role("heading", name="Gate reports")).to_be_visible()
        gate = page.locator(".gate").first
        await expect(gate.locator("tr", has_text="floor")).to_contain_text("0.62")
        await expect(gate.locator("tr", has_text="floor")).to_contain_text("0.5")
        await expect(gate.locator("tr", has_text="cancel")).to_contain_text("0.7 [")
        await expect(gate.locator("tr").filter(has_text="0.62 [0.55, 0.69]")).to_have_count(1)
        await shot(page, "ops-gate-report")

        # promotion: a confirmation step whose reason is required
        await page.get_by_role("button", name="Promote…").click()
        dialog = page.get_by_role("dialog")
        await expect(dialog).to_be_visible()
        await dialog.get_by_role("button", name="Promote").click()
        await expect(dialog).to_be_visible()  # no reason, nothing happens
        assert (await registry.champion()).id == ids["a"]
        await dialog.get_by_label("Reason").fill("better on cancellations")
        await dialog.get_by_role("button", name="Promote").click()
        await expect(page.locator("#flash")).to_contain_text(f"the champion is now {ids['b']}")
        await expect(page.locator("#champion-id")).to_have_text(ids["b"])
        await expect(version_row(page, ids["a"]).locator(".tag.previous")).to_have_text("previous")
        assert (await registry.champion()).id == ids["b"]

        await page.get_by_role("button", name="Audit trail").click()
        first = page.locator("table tbody tr").first
        await expect(first).to_contain_text("promote")
        await expect(first).to_contain_text("better on cancellations")
        await expect(first).to_contain_text(f"{ids['a']} → {ids['b']}")

        await page.get_by_role("button", name="Models").click()
        await page.get_by_role("button", name="Roll back…").click()
        await dialog.get_by_label("Reason").fill("complaints about returns")
        await dialog.get_by_role("button", name="Roll back").click()
        await expect(page.locator("#champion-id")).to_have_text(ids["a"])
        assert (await registry.champion()).id == ids["a"]
        await page.get_by_role("button", name="Audit trail").click()
        await expect(page.locator("table tbody tr").first).to_contain_text("complaints about returns")


async def test_ops_cycles_and_training_curves(console) -> None:
    server, _, ids = console
    async with browser_page() as page:
        await page.goto(server.url + "/ops")
        await page.get_by_label("Ops token").fill(OPS_TOKEN)
        await page.get_by_role("button", name="Sign in").click()
        await page.get_by_role("button", name="Cycles").click()
        await expect(page.locator("section", has_text="Current cycle")).to_contain_text(
            f"{ids['running']} (running, ops, recipe cpu-tiny): step tasks (2 of 5), 25% done")
        await expect(page.get_by_role("button", name="Start a cycle now…")).to_be_disabled()  # one is running
        await expect(page.locator("tr", has_text=ids["done"])).to_contain_text("gate passed")
        await shot(page, "ops-cycles")

        await page.get_by_role("button", name="Training curves").click()
        await expect(page.get_by_text("8 GRPO steps over 2 cycles")).to_be_visible()
        await expect(page.get_by_role("img", name="Mean reward: 8 points")).to_be_visible()
        await expect(page.get_by_role("img", name="Groups all correct / all wrong: 16 points")).to_be_visible()
        await expect(page.get_by_role("img", name="Gate suite pass^1 per cycle: 2 points")).to_be_visible()
        await shot(page, "ops-curves")
        # the page loads nothing from elsewhere and keeps the token out of every URL
        assert OPS_TOKEN not in page.url


async def test_ops_start_a_cycle_from_the_console(empty_db: str, broker_socket: Path) -> None:
    server = await ApiServer(make_settings(empty_db, None, REDIS_URL=f"redis+socket://{broker_socket}",
                                           MUARL_CYCLE_RECIPE="smoke")).start()
    try:
        async with browser_page() as page:
            await page.goto(server.url + "/ops")
            await page.get_by_label("Ops token").fill(OPS_TOKEN)
            await page.get_by_role("button", name="Sign in").click()
            await page.get_by_role("button", name="Cycles").click()
            await expect(page.get_by_text("No cycle is running.")).to_be_visible()
            await page.get_by_role("button", name="Start a cycle now…").click()
            await page.get_by_role("dialog").get_by_role("button", name="Start").click()
            await expect(page.locator("#flash")).to_contain_text(re.compile(r"Cycle c\w+ started"))
            current = page.locator("section", has_text="Current cycle")
            await expect(current).to_contain_text("(queued, ops, recipe smoke)")
            await expect(page.get_by_role("button", name="Start a cycle now…")).to_be_disabled()
        # the worker's start task is on the broker
        queued = redis.Redis(unix_socket_path=str(broker_socket)).lrange(QUEUE, 0, -1)
        assert [json.loads(m)["headers"]["task"] for m in queued] == ["muarl.cycle.start"]
    finally:
        await server.stop()


async def test_a_slow_view_never_replaces_the_one_asked_for_after_it(empty_db: str, broker_socket: Path) -> None:
    """Sign-in loads Models; a click on Cycles before that load answers must leave Cycles on the
    page when the Models answer finally comes (a busy server answers out of order)."""
    server = await ApiServer(make_settings(empty_db, None, REDIS_URL=f"redis+socket://{broker_socket}")).start()
    try:
        async with browser_page() as page:
            held: list = []

            async def hold_models(route) -> None:
                held.append(route)

            await page.route("**/v1/ops/models", hold_models)
            await page.goto(server.url + "/ops")
            await page.get_by_label("Ops token").fill(OPS_TOKEN)
            await page.get_by_role("button", name="Sign in").click()
            for _ in range(200):  # until the Models load is waiting on the server
                if held:
                    break
                await asyncio.sleep(0.05)
            assert len(held) == 1
            await page.get_by_role("button", name="Cycles").click()
            await expect(page.get_by_text("No cycle is running.")).to_be_visible()
            await held[0].continue_()
            await page.wait_for_load_state("networkidle")
            await expect(page.get_by_text("No cycle is running.")).to_be_visible()
            await expect(page.get_by_role("heading", name="Models")).to_have_count(0)
    finally:
        await server.stop()
