"""Running one step of a cycle, and the recovery pass that resumes cycles whose worker died.

`run_step(cycle_id, step)` is what a Celery step task calls. It runs the step only when it is
the cycle's current step and no other process holds the cycle's lock; otherwise it returns
`False` (the task then stops its chain): a message delivered twice, or a duplicate chain, does
nothing. A step that raises marks the cycle failed with its reason and drops the cycle's
snapshot; the champion is never touched before the last step. A step that keeps dying (its
process killed, a hard time limit) fails the cycle after `cycle_max_step_attempts` tries.

`recover()` finds the active cycle whose step nobody runs (its lock is free) and sends its
start task again: at once when a step had begun (its runner is gone), or when the message for
the next step has waited longer than `cycle_redispatch_after_s` (lost). The worker runs it when
it starts and beat runs it periodically, so a cycle continues after a `kill -9` of its worker.
"""

from __future__ import annotations

import datetime as dt
import traceback
from collections.abc import Callable
from typing import Any

import structlog

from backend.config import Settings, get_settings
from backend.db.cycle_models import ACTIVE, STEPS
from rl.pipeline.progress import CycleReporter
from rl.pipeline.state import CycleDB, now

log = structlog.get_logger(__name__)


def store_url(settings: Settings) -> str:
    from backend.db.engine import database_url

    return database_url(settings)


def next_step(step: str) -> str | None:
    i = STEPS.index(step)
    return STEPS[i + 1] if i + 1 < len(STEPS) else None


def run_step(cycle_id: str, step: str, settings: Settings | None = None) -> bool:
    """Run `step` of the cycle if it is due; True when it ran to completion (the chain goes on)."""
    from rl.pipeline.steps import STEP_FUNCTIONS, StepContext

    settings = settings or get_settings()
    url = store_url(settings)
    with CycleDB(url) as db:
        if not db.try_lock(cycle_id, wait_s=3.0):
            log.info("cycle.step_skipped", cycle=cycle_id, step=step, why="another process runs this cycle")
            return False
        cycle = db.get(cycle_id)
        why = _not_due(cycle, step)
        if why:
            log.info("cycle.step_skipped", cycle=cycle_id, step=step, why=why)
            return False
        assert cycle is not None
        attempts = dict(cycle["attempts"] or {})
        attempts[step] = attempts.get(step, 0) + 1
        if attempts[step] > settings.cycle_max_step_attempts:
            _fail(db, settings, cycle_id, f"{step}: did not finish in {settings.cycle_max_step_attempts} attempts "
                                          "(its worker died or it ran past the hard time limit)")
            return False
        t = now()
        db.update(cycle_id, status="running", started_at=cycle["started_at"] or t, step_started_at=t,
                  dispatched_at=None, attempts=attempts, progress=0.0, eta_s=None, detail=None)
        db.event(cycle_id, "step.started", step=step, attempt=attempts[step])
        cycle = db.get(cycle_id)
        assert cycle is not None
        ctx = StepContext(cycle=cycle, db=db, settings=settings, store_url=url, reporter=CycleReporter(db, cycle_id))
        try:
            output = STEP_FUNCTIONS[step](ctx)
        except Exception as e:  # the soft time limit too: the cycle is failed, not left running
            reason = f"{step}: {type(e).__name__}: {e}"
            log.error("cycle.step_failed", cycle=cycle_id, step=step, error=reason,
                      traceback=traceback.format_exc(limit=8))
            _fail(db, settings, cycle_id, reason)
            return False
        # KeyboardInterrupt / SystemExit (the process is stopping) propagate: the cycle stays
        # running and the next worker resumes it
        _finish_step(db, settings, cycle_id, step, output)
        return True


def _not_due(cycle: dict[str, Any] | None, step: str) -> str | None:
    if cycle is None:
        return "no such cycle"
    if cycle["status"] not in ACTIVE:
        return f"the cycle is {cycle['status']}"
    if step in (cycle["outputs"] or {}):
        return "this step already finished"
    if cycle["step"] != step:
        return f"the cycle is at step {cycle['step']}"
    return None


def _finish_step(db: CycleDB, settings: Settings, cycle_id: str, step: str, output: dict[str, Any]) -> None:
    cycle = db.get(cycle_id)
    assert cycle is not None
    outputs = {**(cycle["outputs"] or {}), step: output}
    following = next_step(step)
    t = now()
    seconds = round((t - cycle["step_started_at"]).total_seconds(), 2) if cycle["step_started_at"] else None
    if following is None:
        # the snapshot goes before the cycle says it succeeded, so a finished cycle holds no
        # database (no step after the last needs it; a worker that dies here reruns `promote`)
        _drop_snapshot_or_leave_to_sweep(settings, cycle_id)
        db.update(cycle_id, outputs=outputs, status="succeeded", progress=1.0, eta_s=None, detail=None,
                  finished_at=t, dispatched_at=None)
        db.event(cycle_id, "step.finished", step=step, seconds=seconds)
        db.event(cycle_id, "succeeded")
    else:
        # dispatched_at: the chain sends the next step's message right after this returns
        db.update(cycle_id, outputs=outputs, step=following, progress=0.0, eta_s=None, detail=None, dispatched_at=t)
        db.event(cycle_id, "step.finished", step=step, seconds=seconds)


def _fail(db: CycleDB, settings: Settings, cycle_id: str, reason: str) -> None:
    db.fail(cycle_id, reason)
    _drop_snapshot_or_leave_to_sweep(settings, cycle_id)


def _drop_snapshot_or_leave_to_sweep(settings: Settings, cycle_id: str) -> None:
    try:
        drop_cycle_snapshot(settings, cycle_id)
    except Exception as e:  # the sweep drops it once the cycle has ended
        log.warning("cycle.snapshot_drop_failed", cycle=cycle_id, error=str(e))


def drop_cycle_snapshot(settings: Settings, cycle_id: str) -> None:
    from rl.env.snapshot import _drop
    from rl.pipeline.steps import run_async, snapshot_name

    run_async(_drop(store_url(settings), snapshot_name(cycle_id)))


def recover(send_start: Callable[[str], None], settings: Settings | None = None) -> str | None:
    """Send the active cycle's start task again if nobody runs it; returns its id when it did."""
    settings = settings or get_settings()
    with CycleDB(store_url(settings)) as db:
        cycle = db.active()
        if cycle is None:
            return None
        cid = cycle["id"]
        if not db.try_lock(cid):
            return None  # a live process runs its step
        try:
            cycle = db.get(cid)
            if cycle is None or cycle["status"] not in ACTIVE:
                return None
            waiting = cycle["dispatched_at"]
            lost = waiting is None or now() - waiting > dt.timedelta(seconds=settings.cycle_redispatch_after_s)
            if not lost:
                return None
            why = "its step's worker is gone" if waiting is None else "its next step's message was not picked up"
            db.update(cid, dispatched_at=now())
            db.event(cid, "redispatched", step=cycle["step"], why=why)
            log.warning("cycle.redispatched", cycle=cid, step=cycle["step"], why=why)
        finally:
            db.unlock(cid)
        send_start(cid)
        return cid


def sweep(settings: Settings | None = None) -> dict[str, Any]:
    """Drop scratch databases whose owner process died and snapshots of cycles no longer active."""
    from backend.db.engine import admin_connection
    from rl.env.ownership import sweep_orphan_databases
    from rl.pipeline.steps import run_async

    settings = settings or get_settings()
    url = store_url(settings)
    dropped = run_async(sweep_orphan_databases(url))
    async def _cycle_snapshots() -> list[str]:
        from sqlalchemy import text

        async with admin_connection(url) as admin:
            rows = await admin.execute(text("SELECT datname FROM pg_database WHERE datname LIKE 'muarl\\_cycle\\_%' "
                                            "AND datname NOT LIKE '%\\_o%'"))
            return [r[0] for r in rows]

    from rl.env.snapshot import _drop

    found = run_async(_cycle_snapshots())
    with CycleDB(url) as db:
        # only snapshots of this database's finished cycles: another installation on the same
        # server has cycles of its own
        finished = db.finished_ids([n.removeprefix("muarl_cycle_") for n in found])
    stale = [n for n in found if n.removeprefix("muarl_cycle_") in finished]
    for name in stale:
        run_async(_drop(url, name))
    return {"orphans": dropped, "cycle_snapshots": stale}
