"""Ops HTTP for the online cycle, over real HTTP with an embedded Redis broker: POST starts a
cycle (a row in Postgres and the worker's start task on the broker, sent by name), 409 while one
is active, 401 without the ops token (403 with a wrong one), 503 (and the cycle marked failed) when the broker is
unreachable; GET lists them."""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from backend.broker import QUEUE, start_embedded_redis, stop_embedded_redis
from tests.backend.api.serving import ApiServer, make_settings

OPS = {"Authorization": "Bearer ops-test-token"}


@pytest.fixture
def broker_socket() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ops", dir="/tmp") as d:
        yield start_embedded_redis(Path(d))
        stop_embedded_redis(Path(d))


@pytest.fixture
def settings_overrides(broker_socket: Path) -> dict[str, Any]:
    return {"REDIS_URL": f"redis+socket://{broker_socket}", "MUARL_CYCLE_RECIPE": "smoke"}


def _queued(sock: Path) -> list[dict[str, Any]]:
    r = redis.Redis(unix_socket_path=str(sock))
    out = []
    for raw in r.lrange(QUEUE, 0, -1):
        msg = json.loads(raw)
        body = json.loads(base64.b64decode(msg["body"]))
        out.append({"task": msg["headers"]["task"], "args": body[0]})
    return out


async def test_start_list_and_conflict(client: httpx.AsyncClient, broker_socket: Path) -> None:
    assert (await client.post("/v1/ops/cycles")).status_code == 401
    assert (await client.get("/v1/ops/cycles", headers={"Authorization": "Bearer wrong"})).status_code == 403
    empty = await client.get("/v1/ops/cycles", headers=OPS)
    assert empty.status_code == 200 and empty.json() == {"active": None, "cycles": []}

    started = await client.post("/v1/ops/cycles", headers=OPS, json={"overrides": ["grpo.steps=2"]})
    assert started.status_code == 202, started.text
    cycle = started.json()
    assert cycle["status"] == "queued" and cycle["recipe"] == "smoke" and cycle["step"] == "snapshot"
    assert cycle["trigger"] == "ops" and cycle["overrides"] == ["grpo.steps=2"]
    assert _queued(broker_socket) == [{"task": "muarl.cycle.start", "args": [cycle["cycle_id"]]}]

    busy = await client.post("/v1/ops/cycles", headers=OPS)
    assert busy.status_code == 409
    assert busy.headers["content-type"].startswith("application/problem+json")
    assert busy.json()["active"]["cycle_id"] == cycle["cycle_id"]
    assert len(_queued(broker_socket)) == 1

    listed = (await client.get("/v1/ops/cycles", headers=OPS)).json()
    assert listed["active"]["cycle_id"] == cycle["cycle_id"]
    assert [c["cycle_id"] for c in listed["cycles"]] == [cycle["cycle_id"]]
    assert listed["active"]["progress"]["percent"] == 0.0


async def test_bad_body_is_422(client: httpx.AsyncClient) -> None:
    bad = await client.post("/v1/ops/cycles", headers=OPS, json={"recipe": "no spaces allowed"})
    assert bad.status_code == 422
    bad = await client.post("/v1/ops/cycles", headers=OPS, json={"overrides": ["novalue"]})
    assert bad.status_code == 422
    assert (await client.get("/v1/ops/cycles", headers=OPS)).json()["cycles"] == []  # nothing written


async def test_unreachable_broker_is_503_and_frees_the_slot(tau_db: str, fake_llm) -> None:  # noqa: ANN001
    server = ApiServer(make_settings(tau_db, fake_llm.url, REDIS_URL="redis+socket:///tmp/no-such-muarl.sock"))
    await server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as c:
            first = await c.post("/v1/ops/cycles", headers=OPS)
            assert first.status_code == 503, first.text
            listed = (await c.get("/v1/ops/cycles", headers=OPS)).json()
            assert listed["active"] is None
            assert listed["cycles"][0]["status"] == "failed"
            assert "could not enqueue" in listed["cycles"][0]["error"]
    finally:
        await server.stop()
