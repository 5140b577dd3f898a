"""Starting and reading online cycles from the serving side (API and CLI), without `rl/`.

`create_cycle` inserts a queued cycle; the database refuses a second active one (partial unique
index), which surfaces here as `CycleBusy` naming the active cycle. `start_cycle` also sends the
worker's start task by name over the broker (`backend.broker.celery_client`); when the broker
cannot be reached the new cycle is marked failed with that reason, so it never blocks the next
one. `cycle_json` is the one JSON shape of a cycle (ops API, `muarl cycle status --json`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from backend.db.cycle_models import ACTIVE, STEPS, Cycle

START_TASK = "muarl.cycle.start"  # rl/pipeline/tasks.py registers it under this name


class CycleBusy(Exception):
    def __init__(self, active: Cycle) -> None:
        super().__init__(f"cycle {active.id} is {active.status} (step {active.step})")
        self.active = active


def new_cycle_id() -> str:
    return f"c{dt.datetime.now(dt.UTC):%Y%m%d%H%M%S}{uuid.uuid4().hex[:6]}"


async def active_cycle(engine: AsyncEngine) -> Cycle | None:
    async with AsyncSession(engine, expire_on_commit=False) as s:
        return (await s.execute(select(Cycle).where(Cycle.status.in_(ACTIVE)))).scalar_one_or_none()


async def get_cycle(engine: AsyncEngine, cycle_id: str) -> Cycle | None:
    async with AsyncSession(engine, expire_on_commit=False) as s:
        return await s.get(Cycle, cycle_id)


async def list_cycles(engine: AsyncEngine, limit: int = 20) -> list[Cycle]:
    async with AsyncSession(engine, expire_on_commit=False) as s:
        rows = await s.execute(select(Cycle).order_by(Cycle.created_at.desc()).limit(limit))
        return list(rows.scalars())


async def create_cycle(engine: AsyncEngine, recipe: str, *, overrides: list[str] | None = None,
                       trigger: str = "manual") -> Cycle:
    """A new queued cycle; `CycleBusy` when one is already queued or running."""
    cycle = Cycle(id=new_cycle_id(), status="queued", trigger=trigger, recipe=recipe, overrides=list(overrides or []),
                  step=STEPS[0], dispatched_at=dt.datetime.now(dt.UTC), outputs={}, attempts={}, events=[])
    try:
        async with AsyncSession(engine, expire_on_commit=False) as s, s.begin():
            s.add(cycle)
    except IntegrityError:
        active = await active_cycle(engine)
        if active is None:  # finished between the insert and the read: try once more
            return await create_cycle(engine, recipe, overrides=overrides, trigger=trigger)
        raise CycleBusy(active) from None
    return cycle


async def mark_failed(engine: AsyncEngine, cycle_id: str, reason: str) -> None:
    now = dt.datetime.now(dt.UTC)
    async with AsyncSession(engine) as s, s.begin():
        await s.execute(update(Cycle).where(Cycle.id == cycle_id, Cycle.status.in_(ACTIVE))
                        .values(status="failed", error=reason, finished_at=now, updated_at=now, dispatched_at=None))


def send_start(cycle_id: str, client: Any = None) -> None:
    """Send the worker's start task for `cycle_id` (it chains the cycle's remaining steps)."""
    from backend.broker import QUEUE, celery_client

    app = client or celery_client()
    app.send_task(START_TASK, args=[cycle_id], queue=QUEUE)


async def start_cycle(engine: AsyncEngine, recipe: str, *, overrides: list[str] | None = None,
                      trigger: str = "manual", client: Any = None) -> Cycle:
    """Create a cycle and enqueue it; `CycleBusy` while another is active."""
    cycle = await create_cycle(engine, recipe, overrides=overrides, trigger=trigger)
    try:
        send_start(cycle.id, client)
    except Exception as e:
        await mark_failed(engine, cycle.id, f"could not enqueue the cycle: {e}")
        raise
    return cycle


def _iso(t: dt.datetime | None) -> str | None:
    return t.isoformat() if t else None


def cycle_json(c: Cycle) -> dict[str, Any]:
    """A cycle as JSON: state, step and progress inside it, snapshot, candidate, gate, error, times."""
    step_index = STEPS.index(c.step) if c.step in STEPS else len(STEPS)
    done = c.status == "succeeded"
    overall = 1.0 if done else (step_index + (c.progress or 0.0)) / len(STEPS)
    return {
        "cycle_id": c.id, "status": c.status, "trigger": c.trigger, "recipe": c.recipe, "overrides": c.overrides,
        "step": c.step, "step_index": step_index, "steps": list(STEPS),
        "progress": {"step": c.progress, "overall": round(overall, 4), "percent": round(100 * overall, 1),
                     "eta_seconds": c.eta_s, "detail": c.detail},
        "snapshot": c.snapshot, "champion": c.champion, "candidate": c.candidate,
        "gate_passed": c.gate_passed, "gate_report": c.gate_report, "promoted": bool(c.promoted),
        "error": c.error, "attempts": c.attempts, "events": c.events,
        "created_at": _iso(c.created_at), "started_at": _iso(c.started_at),
        "step_started_at": _iso(c.step_started_at), "updated_at": _iso(c.updated_at),
        "finished_at": _iso(c.finished_at),
    }
