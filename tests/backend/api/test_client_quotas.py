"""Per-client quotas over real HTTP: starting conversations and sending messages (across all of
a client's conversations) are limited per hour, answered 429 with `Retry-After`, counted in
Postgres so that every server process shares them, and a refused request stores nothing."""

from __future__ import annotations

import httpx
import pytest

from tests.backend.api.serving import ApiServer, db_rows, start_chat
from tests.fakes.openai_server import Script, text

PROBLEM = "application/problem+json"


def _assert_429(r: httpx.Response) -> None:
    assert r.status_code == 429, r.text
    assert r.headers["content-type"] == PROBLEM
    assert 1 <= int(r.headers["retry-after"]) <= 3600
    assert "per hour" in r.json()["detail"]


@pytest.mark.parametrize("settings_overrides", [{"MUARL_RATE_CONVERSATIONS_PER_HOUR": 3,
                                                 "MUARL_RATE_CLIENT_HEADER": "X-Forwarded-For"}])
async def test_conversation_starts_are_limited_per_client_across_processes(
        api: ApiServer, client: httpx.AsyncClient, tau_db: str) -> None:
    first = {"X-Forwarded-For": "203.0.113.7, 10.0.0.1"}
    for _ in range(2):
        assert (await client.post("/v1/conversations", headers=first)).status_code == 201
    other_process = ApiServer(api.settings)  # a second server process on the same database
    await other_process.start()
    try:
        async with httpx.AsyncClient(base_url=other_process.url, timeout=30) as c2:
            assert (await c2.post("/v1/conversations", headers=first)).status_code == 201
            _assert_429(await c2.post("/v1/conversations", headers=first))
    finally:
        await other_process.stop()
    _assert_429(await client.post("/v1/conversations", headers=first))
    # another client has its own quota; without the header the peer address is the client
    assert (await client.post("/v1/conversations", headers={"X-Forwarded-For": "203.0.113.8"})).status_code == 201
    assert (await client.post("/v1/conversations")).status_code == 201
    assert (await db_rows(tau_db, "SELECT count(*) AS n FROM conversations"))[0]["n"] == 5


@pytest.mark.parametrize("settings_overrides", [{"MUARL_RATE_MESSAGES_PER_HOUR": 3}])
async def test_messages_are_limited_per_client_across_conversations(client: httpx.AsyncClient,
                                                                   script: Script) -> None:
    script.extend([text(f"answer {i}") for i in range(3)])
    a, b = await start_chat(client), await start_chat(client)
    await a.send("one")
    await a.send("two")
    r = await client.post(f"/v1/conversations/{b.id}/messages/stream", json={"content": "three"}, headers=b.auth)
    assert r.status_code == 200 and "answer 2" in r.text
    for url in (f"/v1/conversations/{b.id}/messages", f"/v1/conversations/{b.id}/messages/stream"):
        _assert_429(await client.post(url, json={"content": "four"}, headers=b.auth))
    _assert_429(await client.post(f"/v1/conversations/{a.id}/messages", json={"content": "five"}, headers=a.auth))
    assert [m["content"] for m in (await b.transcript())["messages"] if m["role"] == "user"] == ["three"]
    assert script.remaining == 0


@pytest.mark.parametrize("settings_overrides", [{"MUARL_RATE_MESSAGES_PER_HOUR": 1,
                                                 "MUARL_API_MAX_MESSAGE_CHARS": 10}])
async def test_a_refused_message_does_not_use_the_quota(client: httpx.AsyncClient, script: Script) -> None:
    script.extend([text("fine")])
    chat = await start_chat(client)
    r = await client.post(f"/v1/conversations/{chat.id}/messages", json={"content": "x" * 11}, headers=chat.auth)
    assert r.status_code == 413
    assert (await chat.send("short"))["reply"] == "fine"
