"""Chat serves the registry's champion, over real HTTP on a real database: promotion and rollback
through the ops API take effect on the next customer message with no restart, the reply's `model`
is the version's served name, transcripts record the version of every assistant message, one turn
never mixes versions, and with no champion and no MUARL_LLM_* chat answers 503 saying so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.db.engine import make_engine
from backend.serving.champion import add_no_model_detail, remove_no_model_detail
from backend.serving.registry import ModelRegistry, Version
from tests.backend.api.serving import ApiServer, db_rows, make_settings, start_chat
from tests.backend.serving.conftest import write_model_folder
from tests.backend.serving.fake_engine import FakeEngine
from tests.fakes.openai_server import Step, text, tool_call

OPS = {"Authorization": "Bearer ops-test-token", "X-Ops-Actor": "tester"}


def slow_lookup_then_answer(request: dict[str, Any]) -> Step:
    """A customer message gets a (slow) tool call first, then a text naming the model asked."""
    last = (request.get("messages") or [{}])[-1]
    if last.get("role") == "user" and "look" in str(last.get("content")):
        call = tool_call("find_user_id_by_email", {"email": "nobody@example.com"})
        return Step(tool_calls=call.tool_calls, delay_s=0.6)
    return text(f"answered by {request.get('model')}")


@pytest.fixture
def engine_server() -> Iterator[FakeEngine]:
    with FakeEngine(serves=["tiny-a"]) as server:
        yield server


@pytest.fixture
async def served_api(tau_db: str, engine_server: FakeEngine) -> AsyncIterator[ApiServer]:
    server = ApiServer(make_settings(tau_db, None, MUARL_MODEL_SERVER_URL=engine_server.url))
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def registry(tau_db: str) -> AsyncIterator[ModelRegistry]:
    engine = make_engine(tau_db, null_pool=True)
    yield ModelRegistry(engine)
    await engine.dispose()


async def two_versions(registry: ModelRegistry, tmp_path: Path) -> tuple[Version, Version]:
    a = await registry.register_folder(write_model_folder(tmp_path / "a"), actor="t", served_name="tiny-a")
    b = await registry.register_folder(write_model_folder(tmp_path / "b", adapter=True), actor="t", base=a.id,
                                       parent=a.id, served_name="tiny-b-lora")
    return a, b


async def test_promotion_and_rollback_switch_the_next_message(served_api: ApiServer, engine_server: FakeEngine,
                                                              registry: ModelRegistry, tau_db: str,
                                                              tmp_path: Path) -> None:
    async def cycle_progress() -> dict[str, Any]:
        return {"cycle": {"stage": "training"}, "detail_suffix": "The first model is being trained."}

    async with httpx.AsyncClient(base_url=served_api.url, timeout=30) as client:
        chat = await start_chat(client)
        add_no_model_detail(cycle_progress)
        try:
            r = await client.post(f"/v1/conversations/{chat.id}/messages", json={"content": "hi"}, headers=chat.auth)
        finally:
            remove_no_model_detail(cycle_progress)
        assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json"
        body = r.json()
        assert "no champion" in body["detail"] and "MUARL_LLM_BASE_URL" in body["detail"]
        assert body["detail"].endswith("The first model is being trained.") and body["cycle"] == {"stage": "training"}

        a, b = await two_versions(registry, tmp_path)
        r = await client.post(f"/v1/ops/models/{a.id}/promote", json={"reason": "first"}, headers=OPS)
        assert r.status_code == 409 and "gate" in r.json()["detail"]
        r = await client.post(f"/v1/ops/models/{a.id}/promote", json={"reason": "first", "skip_gates": True},
                              headers=OPS)
        assert r.status_code == 200, r.text
        assert r.json()["champion"] == a.id and r.json()["event"]["details"]["skip_gates"] is True
        first = await chat.send("hello")
        assert first["reply"] == "answered by tiny-a" and first["model"] == "tiny-a"
        assert first["model_version"] == a.id

        r = await client.post(f"/v1/ops/models/{b.id}/promote", json={"reason": "better"}, headers=OPS)
        assert r.status_code == 409
        await registry.record_gate_report(b.id, a.id, {"passed": True, "checks": []}, actor="gate")
        assert engine_server.loads == []
        r = await client.post(f"/v1/ops/models/{b.id}/promote", json={"reason": "better"}, headers=OPS)
        assert r.status_code == 200, r.text
        # the adapter was loaded under its versioned name before the alias moved
        assert engine_server.loads == [{"lora_name": "tiny-b-lora", "lora_path": b.artifact_uri}]
        second = await chat.send("and now?")
        assert second["model"] == "tiny-b-lora" and second["reply"] == "answered by tiny-b-lora"

        r = await client.post("/v1/ops/rollback", json={"reason": "b is rude"}, headers=OPS)
        assert r.status_code == 200 and r.json()["champion"] == a.id
        third = await chat.send("still there?")
        assert third["model"] == "tiny-a" and third["model_version"] == a.id
        r = await client.post("/v1/ops/rollback", json={"reason": "again"}, headers=OPS)
        assert r.status_code == 409 and "previous" in r.json()["detail"]

        transcript = await chat.transcript()
        replies = [(m["model"], m["model_version"]) for m in transcript["messages"] if m["role"] == "assistant"]
        assert replies == [("tiny-a", a.id), ("tiny-b-lora", b.id), ("tiny-a", a.id)]
        metrics = (await client.get("/metrics")).text
        assert f'muarl_chat_turns_by_version_total{{reason="answer",version="{b.id}"}} 1.0' in metrics
        ready = (await client.get("/readyz")).json()
        assert ready["model_version"] == a.id and ready["model"] == "tiny-a"
    kinds = [e.kind for e in reversed(await registry.events())]
    assert kinds == ["register", "register", "promote", "gate", "promote", "rollback"]


async def test_one_turn_is_answered_by_one_version(tau_db: str, registry: ModelRegistry, tmp_path: Path) -> None:
    with FakeEngine(slow_lookup_then_answer, serves=["tiny-a"]) as engine_server:
        server = await ApiServer(make_settings(tau_db, None, MUARL_MODEL_SERVER_URL=engine_server.url)).start()
        try:
            a, b = await two_versions(registry, tmp_path)
            await registry.switch_champion(a.id, actor="t", reason="first", skip_gates=True)
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                chat = await start_chat(client)
                turn = asyncio.create_task(chat.send("please look me up"))
                while not engine_server.requests:  # the turn's first model call is under way
                    await asyncio.sleep(0.01)
                r = await client.post(f"/v1/ops/models/{b.id}/promote", json={"reason": "mid-turn",
                                                                               "skip_gates": True}, headers=OPS)
                assert r.status_code == 200
                reply = await turn
                assert reply["model"] == "tiny-a" and reply["reply"] == "answered by tiny-a"
                assert [q["model"] for q in engine_server.requests] == ["tiny-a", "tiny-a"]
                nxt = await chat.send("thanks")
                assert nxt["model"] == "tiny-b-lora"
            rows = await db_rows(tau_db, "SELECT role, model, model_version FROM conversation_messages "
                                         "WHERE conversation_id = :c AND role = 'assistant' ORDER BY seq", c=chat.id)
            assert [(r["model"], r["model_version"]) for r in rows] == [
                ("tiny-a", a.id), ("tiny-a", a.id), ("tiny-b-lora", b.id)]
            calls = await db_rows(tau_db, "SELECT model_version FROM conversation_tool_calls "
                                          "WHERE conversation_id = :c", c=chat.id)
            assert [c["model_version"] for c in calls] == [a.id]
        finally:
            await server.stop()


async def test_configured_endpoint_is_recorded_as_an_external_version(
        tau_db: str, registry: ModelRegistry) -> None:
    with FakeEngine() as llm:
        server = await ApiServer(make_settings(tau_db, llm.url)).start()
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                chat = await start_chat(client)
                reply = await chat.send("hello")
        finally:
            await server.stop()
    versions = await registry.list_versions()
    assert len(versions) == 1 and versions[0].engine == "external" and versions[0].artifact_uri == llm.url
    assert reply["model"] == "fake-model" == versions[0].served_name and reply["model_version"] == versions[0].id


async def test_promotion_fails_cleanly_when_the_engine_cannot_serve(served_api: ApiServer, engine_server: FakeEngine,
                                                                   registry: ModelRegistry, tmp_path: Path) -> None:
    a = await registry.register_folder(write_model_folder(tmp_path / "a"), actor="t", served_name="not-served")
    b = await registry.register_folder(write_model_folder(tmp_path / "b", adapter=True), actor="t", base=a.id)
    engine_server.refuse_loads = True
    async with httpx.AsyncClient(base_url=served_api.url, timeout=30) as client:
        for vid in (a.id, b.id):
            r = await client.post(f"/v1/ops/models/{vid}/promote", json={"reason": "x", "skip_gates": True},
                                  headers=OPS)
            assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json", r.text
        assert "does not serve 'not-served'" in (await client.post(
            f"/v1/ops/models/{a.id}/promote", json={"reason": "x", "skip_gates": True}, headers=OPS)).json()["detail"]
    assert (await registry.aliases())["champion"] is None
    assert [e.kind for e in await registry.events()] == ["register", "register"]
    # a full model the local engine does not list yet is loaded there before the switch
    engine_server.refuse_loads = False
    async with httpx.AsyncClient(base_url=served_api.url, timeout=30) as client:
        r = await client.post(f"/v1/ops/models/{a.id}/promote", json={"reason": "x", "skip_gates": True},
                              headers=OPS)
        assert r.status_code == 200, r.text
    assert engine_server.loads[-1] == {"lora_name": "not-served", "lora_path": a.artifact_uri}
    assert "not-served" in engine_server.served
