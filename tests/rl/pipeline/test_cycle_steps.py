"""Cycle steps called directly (the plain functions the Celery tasks call), on a live store:
a failing step fails the cycle with its reason and leaves the champion and the next cycle alone;
a step that keeps dying is given up; a rerun step reuses what it finished; the recovery pass
resends a cycle only when nobody runs it; schedules parse from the setting."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest
from celery.schedules import crontab, schedule
from sqlalchemy import text

from backend.config import Settings
from backend.cycles import CycleBusy, create_cycle, cycle_json, get_cycle
from backend.db.engine import admin_connection, make_engine
from backend.serving.registry import ModelRegistry
from backend.store.checksum import store_checksum
from rl.pipeline.celery_app import beat_schedule, parse_schedule
from rl.pipeline.runner import recover, run_step
from rl.pipeline.state import CycleDB
from rl.pipeline.steps import snapshot_name


async def _exists(url: str, name: str) -> bool:
    async with admin_connection(url) as admin:
        return bool(await admin.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}))


def _tiny_model(folder: Path) -> Path:
    from rl.models.tiny import TinyQwen3Recipe, build_tiny_model, save_model_folder
    from rl.models.tokenizer import train_bpe

    tok = train_bpe(["hello there, how can I help with your order today"] * 20, vocab_size=300)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64))
    return save_model_folder(model, tok, folder, {"kind": "tiny-qwen3"})


async def test_failed_cycle_keeps_champion_and_frees_the_next(live_db: str, cycle_settings: Settings,
                                                              tmp_path: Path) -> None:
    engine = make_engine(live_db, null_pool=True)
    try:
        registry = ModelRegistry(engine)
        champion = await registry.register_folder(_tiny_model(tmp_path / "champ"), actor="test")
        await registry.switch_champion(champion.id, actor="test", reason="setup", skip_gates=True)
        async with engine.connect() as conn:
            before = await store_checksum(conn)

        cycle = await create_cycle(engine, "no-such-recipe")
        with pytest.raises(CycleBusy):
            await create_cycle(engine, "smoke")
        assert await asyncio.to_thread(run_step, cycle.id, "snapshot", cycle_settings)
        assert await _exists(live_db, snapshot_name(cycle.id))
        assert not await asyncio.to_thread(run_step, cycle.id, "tasks", cycle_settings)
        state = cycle_json(await get_cycle(engine, cycle.id))
        assert state["status"] == "failed" and state["step"] == "tasks"
        assert "unknown recipe 'no-such-recipe'" in state["error"]
        assert state["finished_at"] is not None
        assert not await _exists(live_db, snapshot_name(cycle.id))  # its snapshot is gone
        assert (await registry.champion()).id == champion.id  # the champion is untouched
        # later steps of the failed cycle do nothing
        assert not await asyncio.to_thread(run_step, cycle.id, "train", cycle_settings)
        # and the next cycle starts clean
        nxt = await create_cycle(engine, "smoke", trigger="schedule")
        assert nxt.status == "queued" and nxt.step == "snapshot"
        async with engine.connect() as conn:
            assert await store_checksum(conn) == before
    finally:
        await engine.dispose()


async def test_rerun_step_reuses_its_output_and_dying_step_is_given_up(live_db: str, cycle_settings: Settings) -> None:
    engine = make_engine(live_db, null_pool=True)
    try:
        cycle = await create_cycle(engine, "smoke")
        assert await asyncio.to_thread(run_step, cycle.id, "snapshot", cycle_settings)
        first = (await get_cycle(engine, cycle.id)).outputs["snapshot"]
        assert first["reused"] is False and first["users"] > 0
        # as if the worker died after the work but before recording it: the rerun reuses the work
        with CycleDB(live_db) as db:
            db.update(cycle.id, step="snapshot", outputs={})
        assert await asyncio.to_thread(run_step, cycle.id, "snapshot", cycle_settings)
        again = (await get_cycle(engine, cycle.id)).outputs["snapshot"]
        assert again["reused"] is True and again["name"] == first["name"]
        # a step whose runs keep dying is given up after the configured attempts
        with CycleDB(live_db) as db:
            db.update(cycle.id, attempts={"snapshot": 2, "tasks": cycle_settings.cycle_max_step_attempts})
        assert not await asyncio.to_thread(run_step, cycle.id, "tasks", cycle_settings)
        state = await get_cycle(engine, cycle.id)
        assert state.status == "failed" and "did not finish in 3 attempts" in state.error
        assert not await _exists(live_db, snapshot_name(cycle.id))
    finally:
        await engine.dispose()


async def test_recovery_resends_only_an_abandoned_cycle(live_db: str, cycle_settings: Settings) -> None:
    engine = make_engine(live_db, null_pool=True)
    sent: list[str] = []
    try:
        assert await asyncio.to_thread(recover, sent.append, cycle_settings) is None  # no cycle
        cycle = await create_cycle(engine, "smoke")
        # just enqueued: its message is on its way
        assert await asyncio.to_thread(recover, sent.append, cycle_settings) is None
        with CycleDB(live_db) as db:
            db.update(cycle.id, status="running", step="train", dispatched_at=None)
            assert db.try_lock(cycle.id)  # a live worker runs its step
            assert await asyncio.to_thread(recover, sent.append, cycle_settings) is None
        # that worker is gone (its connection, and so its lock): resent at once
        assert await asyncio.to_thread(recover, sent.append, cycle_settings) == cycle.id
        assert sent == [cycle.id]
        # a next-step message nobody picked up for too long is resent too
        with CycleDB(live_db) as db:
            stale = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=cycle_settings.cycle_redispatch_after_s + 5)
            db.update(cycle.id, dispatched_at=stale)
        assert await asyncio.to_thread(recover, sent.append, cycle_settings) == cycle.id
        assert [e["event"] for e in (await get_cycle(engine, cycle.id)).events].count("redispatched") == 2
    finally:
        await engine.dispose()


def test_schedule_setting() -> None:
    assert parse_schedule("off") is None and parse_schedule("") is None
    every = parse_schedule("21600")
    assert isinstance(every, schedule) and every.run_every == dt.timedelta(hours=6)
    nightly = parse_schedule("0 3 * * *")
    assert isinstance(nightly, crontab) and nightly.hour == {3} and nightly.minute == {0}
    for bad in ("often", "-5", "0 3 * *"):
        with pytest.raises(ValueError):
            parse_schedule(bad)
    entries = beat_schedule(Settings(MUARL_CYCLE_SCHEDULE="0 3 * * *"))
    assert entries["cycle"]["task"] == "muarl.cycle.scheduled" and "sweep" in entries
    assert "cycle" not in beat_schedule(Settings(MUARL_CYCLE_SCHEDULE="off"))


async def test_sweep_drops_snapshots_of_finished_cycles_only(live_db: str, cycle_settings: Settings) -> None:
    from rl.pipeline.runner import sweep

    engine = make_engine(live_db, null_pool=True)
    try:
        cycle = await create_cycle(engine, "smoke")
        assert await asyncio.to_thread(run_step, cycle.id, "snapshot", cycle_settings)
        kept = await asyncio.to_thread(sweep, cycle_settings)
        assert snapshot_name(cycle.id) not in kept["cycle_snapshots"]  # active: kept
        assert await _exists(live_db, snapshot_name(cycle.id))
        with CycleDB(live_db) as db:  # failed by a process that died before dropping its snapshot
            db.fail(cycle.id, "test")
        swept = await asyncio.to_thread(sweep, cycle_settings)
        assert swept["cycle_snapshots"] == [snapshot_name(cycle.id)]
        assert not await _exists(live_db, snapshot_name(cycle.id))
    finally:
        await engine.dispose()
