"""The Celery tasks of the online cycle: thin calls into `runner` (plain functions).

- `muarl.cycle.start(cycle_id)`: chains the cycle's remaining steps, from its current one;
- `muarl.cycle.<step>(cycle_id)`: one step (`rl.pipeline.steps`); a step that is not due (already
  done, run elsewhere, the cycle finished) raises `Ignore`, which stops its chain;
- `muarl.cycle.scheduled()`: beat's cycle (skipped while another is active);
- `muarl.cycle.recover()`: resume the active cycle if its worker died;
- `muarl.cycle.sweep()`: drop orphan scratch databases and stale cycle snapshots, then recover.
"""

from __future__ import annotations

from typing import Any

import structlog
from celery import Celery, chain
from celery.exceptions import Ignore

from backend.broker import QUEUE
from backend.cycles import START_TASK
from backend.db.cycle_models import STEPS

log = structlog.get_logger(__name__)


def step_task_name(step: str) -> str:
    return f"muarl.cycle.{step}"


def register(app: Celery) -> None:
    def send_start(cycle_id: str) -> None:
        app.send_task(START_TASK, args=[cycle_id], queue=QUEUE)

    @app.task(name=START_TASK)
    def start(cycle_id: str) -> None:
        from rl.pipeline.runner import store_url
        from rl.pipeline.state import CycleDB

        with CycleDB(store_url(_settings())) as db:
            cycle = db.get(cycle_id)
        if cycle is None or cycle["status"] not in ("queued", "running"):
            raise Ignore()
        remaining = STEPS[STEPS.index(cycle["step"]):]
        chain(*(app.signature(step_task_name(s), args=[cycle_id], immutable=True, queue=QUEUE)
                for s in remaining)).apply_async()

    for step in STEPS:
        _step_task(app, step)

    @app.task(name="muarl.cycle.scheduled")
    def scheduled() -> str | None:
        import asyncio

        from backend.cycles import CycleBusy, create_cycle
        from backend.db.engine import make_engine
        from rl.pipeline.runner import store_url

        settings = _settings()

        async def _create() -> str | None:
            engine = make_engine(store_url(settings), null_pool=True)
            try:
                return (await create_cycle(engine, settings.cycle_recipe, trigger="schedule")).id
            except CycleBusy as e:
                log.info("cycle.schedule_skipped", active=e.active.id)
                return None
            finally:
                await engine.dispose()

        cycle_id = asyncio.run(_create())
        if cycle_id:
            send_start(cycle_id)
        return cycle_id

    @app.task(name="muarl.cycle.recover")
    def recover() -> str | None:
        from rl.pipeline.runner import recover as _recover

        return _recover(send_start, _settings())

    @app.task(name="muarl.cycle.sweep")
    def sweep() -> dict[str, Any]:
        from rl.pipeline.runner import recover as _recover
        from rl.pipeline.runner import sweep as _sweep

        result = _sweep(_settings())
        result["recovered"] = _recover(send_start, _settings())
        return result


def _step_task(app: Celery, step: str) -> None:
    @app.task(name=step_task_name(step))
    def run(cycle_id: str) -> None:
        from rl.pipeline.runner import run_step

        if not run_step(cycle_id, step, _settings()):
            raise Ignore()  # not due, or failed: the rest of the chain must not run


def _settings() -> Any:
    from backend.config import get_settings

    return get_settings()
