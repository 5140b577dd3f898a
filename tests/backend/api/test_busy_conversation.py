"""A conversation whose turn another process holds: the message waits (MUARL_API_TURN_WAIT_S)
without holding a pooled database connection, then gets 409 with `Retry-After`, and nothing is
stored. Checked over real HTTP with a pool of two connections and three waiting messages: a
request to another conversation is still served at once."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from sqlalchemy import text

from backend.db.engine import make_engine
from tests.backend.api.serving import db_rows, start_chat

WAIT_S = 2.0


@pytest.mark.parametrize("settings_overrides", [{"MUARL_API_TURN_WAIT_S": WAIT_S, "MUARL_API_DB_POOL_SIZE": 1}])
async def test_busy_conversation_is_409_with_retry_after_and_holds_no_connection(
        client: httpx.AsyncClient, tau_db: str) -> None:
    busy = [await start_chat(client) for _ in range(3)]
    free = await start_chat(client)
    # another process is answering these three (its lease runs for a long while)
    engine = make_engine(tau_db, null_pool=True)
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE conversations SET busy_until = now() + interval '1 hour', "
                                "busy_holder = 'another-process' WHERE id = ANY(:ids)"), {"ids": [c.id for c in busy]})
    await engine.dispose()

    async def send(chat) -> tuple[httpx.Response, float]:
        t0 = time.perf_counter()
        r = await client.post(f"/v1/conversations/{chat.id}/messages", json={"content": "hello?"},
                              headers=chat.auth)
        return r, time.perf_counter() - t0

    waiting = [asyncio.create_task(send(c)) for c in busy]
    await asyncio.sleep(0.5)  # all three are waiting now; the pool has two connections
    t0 = time.perf_counter()
    r = await client.get(f"/v1/conversations/{free.id}", headers=free.auth)
    served_in = time.perf_counter() - t0
    assert r.status_code == 200
    assert served_in < 1.0, f"a free conversation waited {served_in:.2f} s for a pooled connection"
    assert not any(t.done() for t in waiting)

    for r, took in await asyncio.gather(*waiting):
        assert r.status_code == 409, r.text
        assert r.headers["content-type"] == "application/problem+json"
        assert int(r.headers["retry-after"]) > 0
        assert "still being answered" in r.json()["detail"]
        assert WAIT_S * 0.7 <= took < WAIT_S + 3
    assert (await db_rows(tau_db, "SELECT count(*) AS n FROM conversation_messages"))[0]["n"] == 0
    holders = await db_rows(tau_db, "SELECT DISTINCT busy_holder FROM conversations WHERE id = ANY(:ids)",
                            ids=[c.id for c in busy])
    assert holders == [{"busy_holder": "another-process"}]
