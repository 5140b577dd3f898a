"""Chat's 503 while no model can answer tells the training cycle's progress, read from the cycle
state table over real HTTP: no cycle yet, a running first cycle (step, percent, time left), and
a failed one (its reason)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import text

from backend.cycles import create_cycle, mark_failed
from backend.db.engine import make_engine
from tests.backend.api.serving import ApiServer, make_settings, start_chat


@pytest.fixture
async def unserved(tau_db: str) -> AsyncIterator[ApiServer]:
    """The API with no champion and no external model."""
    server = ApiServer(make_settings(tau_db, None))
    await server.start()
    yield server
    await server.stop()


async def _chat_503(client: httpx.AsyncClient) -> dict:
    chat = await start_chat(client)
    r = await client.post(f"/v1/conversations/{chat.id}/messages", json={"content": "hi"}, headers=chat.auth)
    assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json", r.text
    return r.json()


async def test_503_tells_the_first_cycles_progress(unserved: ApiServer, tau_db: str) -> None:
    engine = make_engine(tau_db, null_pool=True)
    try:
        async with httpx.AsyncClient(base_url=unserved.url, timeout=30) as client:
            body = await _chat_503(client)
            assert body["cycle"] is None and "No training cycle has run yet" in body["detail"]

            cycle = await create_cycle(engine, "first-model")
            async with engine.begin() as conn:
                await conn.execute(text("UPDATE cycles SET status = 'running', step = 'train', progress = 0.5, "
                                        "eta_s = 240, detail = 'cold-start SFT' WHERE id = :i"), {"i": cycle.id})
            body = await _chat_503(client)
            progress = body["cycle"]
            assert progress["cycle_id"] == cycle.id and progress["step"] == "train"
            assert progress["percent"] == 50.0  # step 3 of 5, half done: (2 + 0.5) / 5
            assert progress["eta_seconds"] == 240 and progress["detail"] == "cold-start SFT"
            assert progress["candidate"] is None and progress["gate_passed"] is None and progress["promoted"] is False
            assert "step train (3 of 5), 50% done, about 4 min left in this step" in body["detail"]

            await mark_failed(engine, cycle.id, "out of memory")
            body = await _chat_503(client)
            assert body["cycle"]["status"] == "failed"
            assert body["detail"].endswith(f"The last training cycle ({cycle.id}) failed: out of memory.")
    finally:
        await engine.dispose()
