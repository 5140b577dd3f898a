"""The ops model endpoints over real HTTP: the ops token (401 without, 403 wrong, problem JSON),
listing versions with aliases, one version with its gate reports and events, 404 and 422 as
problem JSON, promotion refused with 409 until a gate report passed, and the event log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from backend.db.engine import make_engine
from backend.serving.registry import ModelRegistry
from tests.backend.api.serving import ApiServer, make_settings
from tests.backend.serving.conftest import write_model_folder
from tests.backend.serving.fake_engine import FakeEngine

OPS = {"Authorization": "Bearer ops-test-token"}


@pytest.fixture
async def ops(empty_db: str) -> AsyncIterator[tuple[httpx.AsyncClient, ModelRegistry, FakeEngine]]:
    with FakeEngine(serves=["m-a"]) as engine_server:
        server = await ApiServer(make_settings(empty_db, None, MUARL_MODEL_SERVER_URL=engine_server.url)).start()
        engine = make_engine(empty_db, null_pool=True)
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                yield client, ModelRegistry(engine), engine_server
        finally:
            await engine.dispose()
            await server.stop()


async def test_ops_token_is_required(ops: tuple[httpx.AsyncClient, ModelRegistry, FakeEngine]) -> None:
    client, _, _ = ops
    for method, path, body in (("GET", "/v1/ops/models", None), ("GET", "/v1/ops/models/v1", None),
                               ("POST", "/v1/ops/models/v1/promote", {"reason": "x"}),
                               ("POST", "/v1/ops/rollback", {"reason": "x"}), ("GET", "/v1/ops/events", None)):
        missing = await client.request(method, path, json=body)
        wrong = await client.request(method, path, json=body, headers={"Authorization": "Bearer nope"})
        assert missing.status_code == 401 and wrong.status_code == 403, path
        assert missing.headers["content-type"] == wrong.headers["content-type"] == "application/problem+json"


async def test_ops_model_contracts(ops: tuple[httpx.AsyncClient, ModelRegistry, FakeEngine], tmp_path: Path) -> None:
    client, registry, _ = ops
    assert (await client.get("/v1/ops/models", headers=OPS)).json() == []
    a = await registry.register_folder(write_model_folder(tmp_path / "a"), actor="t", served_name="m-a")
    b = await registry.register_folder(write_model_folder(tmp_path / "b", adapter=True), actor="t", base=a.id)

    r = await client.post(f"/v1/ops/models/{a.id}/promote", json={"reason": "first"}, headers=OPS)
    assert r.status_code == 409 and "no passed gate report" in r.json()["detail"]
    report = await registry.record_gate_report(a.id, None, {"passed": True, "checks": [{"name": "floor"}]},
                                               "# Gate report: PASSED", actor="gate", suite="suite.json")
    r = await client.post(f"/v1/ops/models/{a.id}/promote", json={"reason": "first"},
                          headers={**OPS, "X-Ops-Actor": "ann"})
    assert r.status_code == 200, r.text
    assert r.json()["event"]["gate_report_id"] == report.id and r.json()["event"]["actor"] == "ops:ann"

    listed = (await client.get("/v1/ops/models", headers=OPS)).json()
    assert [(v["id"], v["aliases"], v["kind"]) for v in listed] == [(a.id, ["champion"], "full"),
                                                                    (b.id, [], "adapter")]
    assert {"id", "name", "aliases", "created_at", "served_name", "engine", "artifact_sha256"} <= set(listed[0])
    one = (await client.get(f"/v1/ops/models/{a.id}", headers=OPS)).json()
    assert one["gate_reports"][0]["passed"] is True and one["gate_reports"][0]["report"]["checks"]
    assert [e["kind"] for e in one["events"]] == ["promote", "gate", "register"]
    assert "model.safetensors" in one["files"]

    missing = await client.get("/v1/ops/models/v404", headers=OPS)
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
    bad = await client.post(f"/v1/ops/models/{b.id}/promote", json={"skip_gates": True}, headers=OPS)
    assert bad.status_code == 422 and "reason" in bad.json()["detail"]
    nope = await client.post("/v1/ops/models/v404/promote", json={"reason": "x", "skip_gates": True}, headers=OPS)
    assert nope.status_code == 404
    events = (await client.get("/v1/ops/events", headers=OPS)).json()
    assert [e["kind"] for e in events] == ["promote", "gate", "register", "register"]
    assert (await client.get("/v1/ops/events", params={"version": b.id, "limit": 5}, headers=OPS)).json()[0][
        "kind"] == "register"
