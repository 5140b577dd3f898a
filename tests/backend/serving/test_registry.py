"""The registry on a real PostgreSQL: versions record their folder and cannot change, aliases move
only through promotion/rollback under a row lock (concurrent promotions serialize), every change
appends an event, and promotion needs a passed gate report against the champion of that moment."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.serving.artifacts import ArtifactError, read_model_folder
from backend.serving.registry import AliasConflict, GatesNotPassed, ModelRegistry, RegistryError, VersionNotFound
from tests.backend.serving.conftest import write_model_folder

PASSED = {"passed": True, "checks": []}
FAILED = {"passed": False, "checks": []}


async def test_register_folder_records_manifest_and_hashes(registry: ModelRegistry, tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path / "m1")
    v = await registry.register_folder(folder, actor="test")
    assert v.id == "v1" and v.kind == "full" and v.engine == "local" and v.served_name == "m1-v1"
    assert v.artifact_uri == str(folder.resolve())
    assert v.artifact_sha256 == read_model_folder(folder).sha256 and len(v.artifact_sha256) == 64
    assert set(v.files) == {"config.json", "model.safetensors", "tokenizer.json", "manifest.json"}
    assert v.recipe == {"name": "tiny", "gate": {"suite": "suite.jsonl", "floor": 0.1}}
    assert v.training_run == "runs/r1" and v.store_snapshot == "seed:0:500" and v.view == {"references": True}
    assert v.training_metrics and v.training_metrics["final_reward"] == 0.5
    adapter = await registry.register_folder(write_model_folder(tmp_path / "a", adapter=True), actor="test",
                                             name="lora", base=v.id, parent=v.id)
    assert adapter.kind == "adapter" and adapter.base_version_id == v.id and adapter.parent_version_id == v.id
    events = await registry.events()
    assert [e.kind for e in events] == ["register", "register"] and events[0].to_version_id == adapter.id


async def test_bad_registrations_are_refused_without_writing(registry: ModelRegistry, tmp_path: Path) -> None:
    with pytest.raises(ArtifactError):
        await registry.register_folder(tmp_path / "missing", actor="t")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtifactError, match="config.json"):
        await registry.register_folder(tmp_path / "empty", actor="t")
    with pytest.raises(RegistryError, match="base"):
        await registry.register_folder(write_model_folder(tmp_path / "a", adapter=True), actor="t")
    with pytest.raises(VersionNotFound):
        await registry.register_folder(write_model_folder(tmp_path / "b"), actor="t", parent="v999")
    assert await registry.list_versions() == [] and await registry.events() == []


async def test_versions_events_and_reports_are_immutable(registry: ModelRegistry, reg_engine: AsyncEngine,
                                                         tmp_path: Path) -> None:
    v = await registry.register_folder(write_model_folder(tmp_path / "m"), actor="t")
    await registry.record_gate_report(v.id, None, PASSED, "# ok", actor="t")
    for sql in ("UPDATE model_versions SET name = 'x'", "DELETE FROM model_versions",
                "UPDATE model_events SET reason = 'x'", "DELETE FROM model_events",
                "UPDATE model_gate_reports SET passed = false", "DELETE FROM model_gate_reports"):
        with pytest.raises(DBAPIError, match="immutable"):
            async with reg_engine.begin() as conn:
                await conn.execute(text(sql))
    assert (await registry.require(v.id)).name == "m"


async def test_promote_needs_a_gate_report_against_the_current_champion(registry: ModelRegistry,
                                                                       tmp_path: Path) -> None:
    a = await registry.register_folder(write_model_folder(tmp_path / "a"), actor="t")
    b = await registry.register_folder(write_model_folder(tmp_path / "b", weights=b"other"), actor="t")
    with pytest.raises(GatesNotPassed, match="no passed gate report"):
        await registry.switch_champion(a.id, actor="t", reason="first")
    await registry.record_gate_report(a.id, None, FAILED, actor="t")
    with pytest.raises(GatesNotPassed):
        await registry.switch_champion(a.id, actor="t", reason="first")
    report = await registry.record_gate_report(a.id, None, PASSED, actor="t")
    change = await registry.switch_champion(a.id, actor="ops", reason="first model")
    assert change.champion_before is None and change.champion_after == a.id
    assert change.event.gate_report_id == report.id and change.event.details["skip_gates"] is False
    # b passed against "no champion", but the champion is now a: that report no longer counts
    await registry.record_gate_report(b.id, None, PASSED, actor="t")
    with pytest.raises(GatesNotPassed, match=f"champion {a.id}"):
        await registry.switch_champion(b.id, actor="t", reason="second")
    await registry.record_gate_report(b.id, a.id, PASSED, actor="t")
    await registry.switch_champion(b.id, actor="ops", reason="better")
    assert await registry.aliases() == {"champion": b.id, "previous": a.id, "candidate": None}
    assert (await registry.champion()).id == b.id  # type: ignore[union-attr]
    with pytest.raises(AliasConflict, match="already the champion"):
        await registry.switch_champion(b.id, actor="t", reason="again", skip_gates=True)
    with pytest.raises(RegistryError, match="reason"):
        await registry.switch_champion(a.id, actor="t", reason=" ", skip_gates=True)


async def test_skip_gates_rollback_and_retire(registry: ModelRegistry, tmp_path: Path) -> None:
    a = await registry.register_folder(write_model_folder(tmp_path / "a"), actor="t")
    b = await registry.register_folder(write_model_folder(tmp_path / "b"), actor="t")
    with pytest.raises(AliasConflict, match="no previous"):
        await registry.rollback(actor="t", reason="nothing yet")
    first = await registry.switch_champion(a.id, actor="ops", reason="bootstrap", skip_gates=True)
    assert first.event.details["skip_gates"] is True and first.event.gate_report_id is None
    await registry.set_candidate(b.id, actor="cycle")
    assert (await registry.require(b.id)).aliases == ["candidate"]
    await registry.switch_champion(b.id, actor="ops", reason="try b", skip_gates=True)
    assert await registry.aliases() == {"champion": b.id, "previous": a.id, "candidate": None}
    back = await registry.rollback(actor="ops", reason="b answers badly")
    assert back.champion_before == b.id and back.champion_after == a.id
    assert back.event.kind == "rollback" and back.event.from_version_id == b.id
    assert await registry.aliases() == {"champion": a.id, "previous": None, "candidate": None}
    with pytest.raises(AliasConflict, match="champion"):
        await registry.retire(a.id, actor="ops", reason="no")
    await registry.retire(b.id, actor="ops", reason="bad answers")
    assert (await registry.require(b.id)).retired
    with pytest.raises(AliasConflict, match="retired"):
        await registry.switch_champion(b.id, actor="ops", reason="again", skip_gates=True)
    kinds = [e.kind for e in reversed(await registry.events())]
    assert kinds == ["register", "register", "promote", "alias", "promote", "rollback", "retire"]


async def test_concurrent_promotions_serialize(registry: ModelRegistry, tmp_path: Path) -> None:
    versions = [await registry.register_folder(write_model_folder(tmp_path / f"m{i}"), actor="t") for i in range(6)]
    gen0 = await registry.generation()
    await asyncio.gather(*(registry.switch_champion(v.id, actor=f"ops{i}", reason="race", skip_gates=True)
                           for i, v in enumerate(versions)))
    promotes = sorted((e for e in await registry.events() if e.kind == "promote"), key=lambda e: e.id)
    assert len(promotes) == 6
    # each promotion saw the one before it: from -> to forms one chain, no lost update
    assert promotes[0].from_version_id is None
    for before, after in zip(promotes, promotes[1:], strict=False):
        assert after.from_version_id == before.to_version_id
    aliases = await registry.aliases()
    assert aliases["champion"] == promotes[-1].to_version_id and aliases["previous"] == promotes[-1].from_version_id
    assert await registry.generation() == gen0 + 6


async def test_external_version_is_registered_once(registry: ModelRegistry) -> None:
    first = await asyncio.gather(*(registry.external_version("http://llm:8000/v1", "qwen3-8b") for _ in range(5)))
    again = await registry.external_version("http://llm:8000/v1", "qwen3-8b")
    assert {v.id for v in first} == {again.id} and again.engine == "external" and again.served_name == "qwen3-8b"
    other = await registry.external_version("http://other:8000/v1", "qwen3-8b")
    assert other.id != again.id and len(await registry.list_versions()) == 2
