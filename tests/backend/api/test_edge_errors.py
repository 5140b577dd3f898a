"""What an outside probe found at the API's edge, asked again over real HTTP against the real
app: invalid bytes in a conversation id are a 404 (never a 500, never reaching the database),
404 details do not echo ids of any length, a database that is unreachable or not migrated is a
503 with `Retry-After`, and `HEAD /healthz` / `HEAD /readyz` work."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import httpx
import pytest

from backend.db.testing import TestDatabases
from tests.backend.api.serving import ApiServer, make_settings, start_chat

PROBLEM = "application/problem+json"
BAD_IDS = ["%00", "a%00b", "%FF", "%C3%28", "%ED%A0%80", "x" * 65, "%E2%80%8B", "..%2F..%2Fetc", "a%20b", "%0A"]


def _assert_problem(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, (r.request.url, r.status_code, r.text)
    assert r.headers["content-type"] == PROBLEM
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


@pytest.mark.parametrize("with_token", [True, False])
async def test_invalid_ids_are_404_on_every_conversation_route(client: httpx.AsyncClient, with_token: bool) -> None:
    chat = await start_chat(client)
    headers = chat.auth if with_token else {}
    for bad in BAD_IDS:
        _assert_problem(await client.get(f"/v1/conversations/{bad}", headers=headers), 404)
        for tail in ("messages", "messages/stream"):
            r = await client.post(f"/v1/conversations/{bad}/{tail}", json={"content": "hi"}, headers=headers)
            _assert_problem(r, 404)
    # the service is fine afterwards, and a well-formed unknown id still needs a token first
    assert (await chat.transcript())["messages"] == []
    _assert_problem(await client.get(f"/v1/conversations/{'0' * 32}"), 401)
    _assert_problem(await client.get(f"/v1/conversations/{'0' * 32}", headers=chat.auth), 404)


async def test_404_details_do_not_echo_long_ids(client: httpx.AsyncClient) -> None:
    chat = await start_chat(client)
    long_id = "z" * 5000
    for path in (f"/v1/conversations/{long_id}", f"/v1/conversations/{'y' * 64}"):
        body = _assert_problem(await client.get(path, headers=chat.auth), 404)
        assert len(body["detail"]) < 120 and len(body.get("instance", "")) <= 200
    assert "5000 characters" in _assert_problem(await client.get(f"/v1/conversations/{long_id}",
                                                                 headers=chat.auth), 404)["detail"]
    r = await client.get("/no/such/route/" + "q" * 5000)
    assert r.status_code == 404 and len(r.text) < 400


async def test_head_health_and_readiness(client: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz"):
        r = await client.head(path)
        assert r.status_code == 200 and r.content == b""
        assert (await client.get(path)).status_code == 200


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.fixture
async def unmigrated_db(test_dbs: TestDatabases) -> AsyncIterator[str]:
    url = await test_dbs.create("bare", migrate=False)
    yield url
    from sqlalchemy.engine import make_url

    await test_dbs.drop(make_url(url).database)


async def _probe_unavailable(db_url: str) -> None:
    server = ApiServer(make_settings(db_url, None))
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as c:
            r = await c.post("/v1/conversations")
            _assert_problem(r, 503)
            assert int(r.headers["retry-after"]) > 0
            assert "Traceback" not in r.text and "asyncpg" not in r.text
            token = {"Authorization": "Bearer whatever"}
            _assert_problem(await c.get(f"/v1/conversations/{'a' * 32}", headers=token), 503)
            _assert_problem(await c.post(f"/v1/conversations/{'a' * 32}/messages", json={"content": "hi"},
                                         headers=token), 503)
            ready = await c.get("/readyz")
            _assert_problem(ready, 503)
            assert (await c.head("/readyz")).status_code == 503
            assert (await c.get("/healthz")).status_code == 200  # the process itself is alive
            mcp = await c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                               headers={"Authorization": "Bearer not-the-env-token"})
            _assert_problem(mcp, 503)
    finally:
        await server.stop()


async def test_unreachable_database_is_503_with_retry_after() -> None:
    await _probe_unavailable(f"postgresql+asyncpg://muarl@127.0.0.1:{_closed_port()}/muarl")


async def test_unmigrated_database_is_503_with_retry_after(unmigrated_db: str) -> None:
    await _probe_unavailable(unmigrated_db)
