"""When the model times out or fails, the customer gets a polite "please try again" (never a
500 or a traceback), retries are bounded, nothing is lost, and the conversation carries on
once the model is back. Without a configured model the API still runs and chat says how to
configure one."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.backend.api.serving import ApiServer, make_settings, start_chat
from tests.fakes.openai_server import FakeOpenAIServer, Script, delay, error, text, tool_call


def _metric(metrics_text: str, prefix: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics_text.splitlines() if line.startswith(prefix))


async def test_server_errors_are_retried_then_answered_politely(client: httpx.AsyncClient, script: Script,
                                                                 fake_llm: FakeOpenAIServer) -> None:
    metrics = (await client.get("/metrics")).text
    before = _metric(metrics, 'muarl_llm_errors_total{kind="server_error"')
    retries_before = _metric(metrics, "muarl_llm_retries_total{")
    script.extend([error(500), error(503), error(500), text("Back online, how can I help?")])
    chat = await start_chat(client)
    reply = await chat.send("hello")
    assert reply["ended_by"] == "llm_unavailable" and reply["notice"] is True
    assert "try again" in reply["reply"].lower()
    assert len(fake_llm.requests) == 2  # one try + MUARL_LLM_MAX_RETRIES=1 retry, no more
    # a failure then a success: the retry hides the failure
    again = await chat.send("hello again")
    assert again["reply"] == "Back online, how can I help?" and again["notice"] is False
    # the notice is shown to the customer but never fed to the model
    history = fake_llm.requests[-1]["messages"]
    assert [m["role"] for m in history] == ["system", "user", "user"]
    transcript = (await chat.transcript())["messages"]
    assert [(m["role"], m["notice"]) for m in transcript] == [
        ("user", False), ("assistant", True), ("user", False), ("assistant", False)]
    metrics = (await client.get("/metrics")).text
    # one request failed after its retry; one retry in each turn
    assert _metric(metrics, 'muarl_llm_errors_total{kind="server_error"') - before == 1
    assert _metric(metrics, "muarl_llm_retries_total{") - retries_before == 2


@pytest.mark.parametrize("settings_overrides", [{"MUARL_LLM_TIMEOUT_S": 0.3}])
async def test_timeouts_give_a_polite_reply_in_bounded_time(client: httpx.AsyncClient, script: Script,
                                                            fake_llm: FakeOpenAIServer) -> None:
    script.extend([delay(1.2), delay(1.2)])
    chat = await start_chat(client)
    start = time.monotonic()
    reply = await chat.send("hello")
    assert time.monotonic() - start < 2.5
    assert reply["ended_by"] == "llm_unavailable" and "try again" in reply["reply"].lower()
    assert len(fake_llm.requests) == 2


async def test_an_outage_in_the_middle_of_a_turn_keeps_the_work_done(client: httpx.AsyncClient, script: Script,
                                                                     tau_retail) -> None:
    user = next(iter(tau_retail["users"].values()))
    script.extend([tool_call("find_user_id_by_email", {"email": user["email"]}), error(500), error(500),
                   text("Thanks, you're verified.")])
    chat = await start_chat(client)
    first = await chat.send(f"I'm {user['email']}")
    assert first["ended_by"] == "llm_unavailable"
    assert first["tool_calls"] == [{"name": "find_user_id_by_email", "outcome": "ok"}]
    assert (await chat.send("are you there?"))["reply"] == "Thanks, you're verified."
    assert (await chat.transcript())["authenticated"] is True


async def test_garbage_from_the_model_is_an_outage_not_a_crash(client: httpx.AsyncClient, script: Script) -> None:
    from tests.fakes.openai_server import Step

    script.extend([Step(raw_body='{"unexpected": true}'), Step(raw_body="[]")])
    chat = await start_chat(client)
    reply = await chat.send("hello")
    assert reply["ended_by"] == "llm_unavailable"


async def test_without_a_model_chat_is_503_with_how_to_configure(tau_db: str) -> None:
    server = ApiServer(make_settings(tau_db, None))
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
            chat = await start_chat(client)
            r = await client.post(f"/v1/conversations/{chat.id}/messages", json={"content": "hi"},
                                  headers=chat.auth)
            assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json"
            detail = r.json()["detail"]
            assert "MUARL_LLM_BASE_URL" in detail and "MUARL_LLM_MODEL" in detail
            ready = (await client.get("/readyz")).json()
            assert ready["status"] == "ready" and ready["model_configured"] is False
            assert (await chat.transcript())["messages"] == []
    finally:
        await server.stop()
