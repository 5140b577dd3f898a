"""A whole cycle run step by step in this process (the functions the Celery tasks call), on a
live store: the first cycle cold-starts and is promoted, the second trains GRPO from that
champion; the live store's rows never change and no cycle database is left behind."""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import text

from backend.config import Settings
from backend.cycles import CycleBusy, create_cycle, cycle_json, get_cycle
from backend.db.cycle_models import STEPS
from backend.db.engine import admin_connection, make_engine
from backend.serving.registry import ModelRegistry
from backend.store.checksum import store_checksum
from rl.pipeline.runner import run_step
from rl.pipeline.steps import snapshot_name


async def _checksum(url: str) -> dict[str, str]:
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return await store_checksum(conn)
    finally:
        await engine.dispose()


async def _databases(url: str, like: str) -> list[str]:
    async with admin_connection(url) as admin:
        return [r[0] for r in await admin.execute(text("SELECT datname FROM pg_database WHERE datname LIKE :l"),
                                                  {"l": like})]


async def _run_cycle(engine, settings: Settings) -> dict:  # noqa: ANN001
    cycle = await create_cycle(engine, "smoke")
    with_second = None
    try:
        await create_cycle(engine, "smoke")
    except CycleBusy as e:
        with_second = e.active.id
    assert with_second == cycle.id, "a second active cycle must be refused by the database"
    for step in STEPS:
        ran = await asyncio.to_thread(run_step, cycle.id, step, settings)
        state = cycle_json(await get_cycle(engine, cycle.id))
        assert ran, f"step {step} did not run: {state['error']}"
        # a second delivery of a finished step does nothing
        assert not await asyncio.to_thread(run_step, cycle.id, step, settings)
    state = cycle_json(await get_cycle(engine, cycle.id))
    print("step seconds", {e["step"]: e["seconds"] for e in state["events"] if e["event"] == "step.finished"})
    return state


async def test_two_cycles_cold_start_then_grpo(live_db: str, cycle_settings: Settings) -> None:
    engine = make_engine(live_db, null_pool=True)
    before = await _checksum(live_db)
    try:
        first = await _run_cycle(engine, cycle_settings)
        assert first["status"] == "succeeded", first["error"]
        assert first["outputs"] if "outputs" in first else True
        registry = ModelRegistry(engine)
        champion = await registry.champion()
        assert first["gate_passed"] is True and first["promoted"] is True
        assert champion is not None and champion.id == first["candidate"]
        assert (await registry.gate_reports(first["candidate"]))[0].passed

        second = await _run_cycle(engine, cycle_settings)
        assert second["status"] == "succeeded", second["error"]
        assert second["champion"] == first["candidate"]
        row = await get_cycle(engine, second["cycle_id"])
        assert row.outputs["train"]["method"] == "grpo" and row.outputs["train"]["from"] == first["candidate"]
        assert second["gate_report"]["baseline"] == first["candidate"]
        version = await registry.get(second["candidate"])
        assert version.parent_version_id == first["candidate"]
        manifest = json.loads((cycle_settings.var_dir / "models" / second["cycle_id"] / "manifest.json").read_text())
        assert manifest["store_snapshot"] == snapshot_name(second["cycle_id"])
    finally:
        await engine.dispose()
    assert await _checksum(live_db) == before, "the cycle wrote to the live store"
    assert await _databases(live_db, "muarl\\_cycle\\_%") == []
