"""Bad input gets a clear problem-JSON answer and loses nothing: oversized messages (413),
too many messages (429), invalid bodies (422), concurrent messages to one conversation
(answered one after the other), and malformed tool calls from the model (sent back to it as
errors, never run half way)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.backend.api.serving import customer_with, db_rows, start_chat
from tests.fakes.openai_server import FakeOpenAIServer, Script, text, tool_call, tool_calls

PROBLEM = "application/problem+json"


@pytest.mark.parametrize("settings_overrides", [{"MUARL_API_MAX_MESSAGE_CHARS": 100,
                                                 "MUARL_API_MAX_BODY_BYTES": 10_000}])
async def test_oversized_messages_get_413_and_change_nothing(client: httpx.AsyncClient, script: Script,
                                                             tau_db: str) -> None:
    chat = await start_chat(client)
    r = await client.post(f"/v1/conversations/{chat.id}/messages", json={"content": "x" * 101}, headers=chat.auth)
    assert r.status_code == 413 and r.headers["content-type"] == PROBLEM
    assert "at most 100" in r.json()["detail"]
    huge = await client.post(f"/v1/conversations/{chat.id}/messages", json={"content": "y" * 50_000},
                             headers=chat.auth)
    assert huge.status_code == 413 and huge.headers["content-type"] == PROBLEM
    assert (await db_rows(tau_db, "SELECT count(*) AS n FROM conversation_messages"))[0]["n"] == 0
    script.extend([text("ok")])
    assert (await chat.send("x" * 100))["reply"] == "ok"


@pytest.mark.parametrize("settings_overrides", [{"MUARL_API_RATE_LIMIT_PER_MINUTE": 3}])
async def test_rate_limit_per_conversation_is_429(client: httpx.AsyncClient, script: Script) -> None:
    script.extend([text(f"answer {i}") for i in range(4)])
    chat = await start_chat(client)
    for i in range(3):
        assert (await chat.send(f"message {i}"))["reply"] == f"answer {i}"
    r = await client.post(f"/v1/conversations/{chat.id}/messages", json={"content": "one more"}, headers=chat.auth)
    assert r.status_code == 429 and r.headers["content-type"] == PROBLEM
    assert r.headers["retry-after"] == "60"
    # another conversation is not affected
    other = await start_chat(client)
    assert (await other.send("hello"))["reply"] == "answer 3"
    assert len((await chat.transcript())["messages"]) == 6


async def test_invalid_bodies_are_422_problems(client: httpx.AsyncClient, script: Script) -> None:
    chat = await start_chat(client)
    url = f"/v1/conversations/{chat.id}/messages"
    for body in ({}, {"content": ""}, {"content": "   "}, {"content": 5}, {"content": "a\u0000b"}):
        r = await client.post(url, json=body, headers=chat.auth)
        assert r.status_code == 422, (body, r.text)
        assert r.headers["content-type"] == PROBLEM and r.json()["detail"]
    r = await client.post(url, content=b"{not json", headers={**chat.auth, "content-type": "application/json"})
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM
    assert "Traceback" not in r.text
    assert (await chat.transcript())["messages"] == []


async def test_concurrent_messages_to_one_conversation_are_serialized(client: httpx.AsyncClient,
                                                                       script: Script) -> None:
    script.extend([text("first answer", delay_s=0.3), text("second answer", delay_s=0.3)])
    chat = await start_chat(client)
    a, b = await asyncio.gather(chat.send("first"), chat.send("second"))
    assert {a["reply"], b["reply"]} == {"first answer", "second answer"}
    messages = (await chat.transcript())["messages"]
    # each answer directly follows its own question: the turns did not interleave
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    by_question = {messages[0]["content"]: messages[1]["content"], messages[2]["content"]: messages[3]["content"]}
    assert set(by_question) == {"first", "second"}
    assert {a["reply"], b["reply"]} == set(by_question.values())


async def test_malformed_tool_calls_go_back_to_the_model_as_errors(
        client: httpx.AsyncClient, script: Script, fake_llm: FakeOpenAIServer, tau_retail) -> None:
    user, _ = customer_with(tau_retail, "pending")
    script.extend([
        tool_call("delete_all_orders", {}),
        tool_call("find_user_id_by_email", '{"email": "broken'),
        tool_call("find_user_id_by_email", {"email": 42}),
        tool_call("find_user_id_by_email", {"email": user["email"], "admin": True}),
        tool_calls(("find_user_id_by_email", {"email": user["email"]}), ("think", {"thought": "never run"})),
        text("You're verified."),
    ])
    chat = await start_chat(client)
    reply = await chat.send(f"hi, {user['email']}")
    assert reply["reply"] == "You're verified."
    assert [(c["name"], c["outcome"]) for c in reply["tool_calls"]] == [
        ("delete_all_orders", "error"), ("find_user_id_by_email", "error"), ("find_user_id_by_email", "error"),
        ("find_user_id_by_email", "error"), ("find_user_id_by_email", "ok")]
    results = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("Error: unknown tool 'delete_all_orders'")
    assert results[1].startswith("Error: arguments are not valid JSON")
    assert results[2].startswith("Error: argument 'email' must be of type string")
    assert results[3].startswith("Error: unexpected argument")
    assert results[4] == user["user_id"]
    # the invalid JSON went back to the model as '{}' (servers reject broken history) ...
    sent = [m for m in fake_llm.requests[-1]["messages"] if m.get("tool_calls")]
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    # ... only one call per step was run and kept
    assert len(sent[4]["tool_calls"]) == 1 and sent[4]["tool_calls"][0]["function"]["name"] == "find_user_id_by_email"
    # ... and the transcript keeps exactly what the model wrote
    transcript = (await chat.transcript())["messages"]
    assert transcript[3]["tool_calls"][0]["function"]["arguments"] == '{"email": "broken'


@pytest.mark.parametrize("settings_overrides", [{"MUARL_AGENT_MAX_STEPS": 3}])
async def test_step_limit_ends_the_turn_politely(client: httpx.AsyncClient, script: Script) -> None:
    script.extend([tool_call("think", {"thought": f"step {i}"}) for i in range(3)] + [text("next turn")])
    chat = await start_chat(client)
    reply = await chat.send("help")
    assert reply["ended_by"] == "step_limit" and reply["notice"] is True
    assert len(reply["tool_calls"]) == 3
    assert (await chat.send("again"))["reply"] == "next turn"


async def test_transfer_hands_the_conversation_to_a_human(client: httpx.AsyncClient, script: Script) -> None:
    script.extend([tool_call("transfer_to_human_agents", {"summary": "customer wants a refund outside policy"})])
    chat = await start_chat(client)
    reply = await chat.send("I want to speak to a person")
    assert reply["ended_by"] == "transfer" and reply["status"] == "transferred"
    r = await client.post(f"/v1/conversations/{chat.id}/messages", json={"content": "hello?"}, headers=chat.auth)
    assert r.status_code == 409 and r.headers["content-type"] == PROBLEM
    assert (await chat.transcript())["status"] == "transferred"


async def test_two_service_processes_serialize_one_conversation(api, client: httpx.AsyncClient, script: Script) -> None:
    """A second app instance on the same database (another process in production) waits for the
    turn lease the first one holds, instead of interleaving its turn."""
    from tests.backend.api.serving import ApiServer

    second = ApiServer(api.settings)
    await second.start()
    try:
        script.extend([text("slow answer", delay_s=0.5), text("second answer")])
        chat = await start_chat(client)
        async with httpx.AsyncClient(base_url=second.url, timeout=30) as other_client:
            other = type(chat)(other_client, chat.id, chat.token)
            first_task = asyncio.create_task(chat.send("first"))
            await asyncio.sleep(0.15)  # the first turn holds the lease now
            b = await other.send("second")
            a = await first_task
        assert (a["reply"], b["reply"]) == ("slow answer", "second answer")
        roles = [(m["role"], m["content"]) for m in (await chat.transcript())["messages"]]
        assert roles == [("user", "first"), ("assistant", "slow answer"), ("user", "second"),
                         ("assistant", "second answer")]
    finally:
        await second.stop()
