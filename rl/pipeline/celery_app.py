"""The Celery app of the online cycle, built from settings.

Broker: `backend.broker.broker_url()` (`REDIS_URL`, or the embedded Redis). No result backend:
the cycle's state lives in Postgres, and a chain needs none. The settings for long ML steps are
deliberate (README, "The online cycle"):
- `task_acks_late`: a step's message is acknowledged when the step ends, not when it starts, so
  a step whose worker dies is delivered again instead of lost (steps are idempotent);
- `task_reject_on_worker_lost`: a pool child killed mid-step (OOM, SIGKILL) puts its message
  back at once; without it Celery acknowledges it as failed;
- `worker_prefetch_multiplier = 1` and concurrency 1: a worker reserves one message at a time,
  so nothing waits behind a two-hour step on a busy worker while another could take it;
- `visibility_timeout` (Redis): a message not acknowledged within it is handed out again; it is
  set longer than the hard time limit of a step, or a long step would be started twice;
- `task_soft_time_limit` / `task_time_limit`: a step that runs away is stopped (soft: the step
  fails the cycle with its reason; hard: the child is killed and the attempt counts);
- `worker_max_tasks_per_child = 1`: every step runs in a fresh process, so a training step's
  memory (torch, sandboxes' connections) is returned to the system when it ends.
Beat runs scheduled cycles (`MUARL_CYCLE_SCHEDULE`: seconds or a crontab) and a periodic sweep
(orphan databases, stale cycle snapshots, cycles whose worker died).
"""

from __future__ import annotations

import ctypes
import signal
from datetime import timedelta
from typing import Any

from celery import Celery
from celery.schedules import crontab, schedule
from celery.signals import worker_process_init, worker_ready

from backend.broker import QUEUE, broker_url
from backend.config import Settings, get_settings


def parse_schedule(spec: str) -> Any:
    """`MUARL_CYCLE_SCHEDULE` as a Celery schedule: None for "off"/"", seconds for a number
    ("21600"), a crontab for five fields ("0 3 * * *"); ValueError otherwise."""
    spec = spec.strip()
    if spec.lower() in ("", "off", "none", "0"):
        return None
    try:
        seconds = float(spec)
    except ValueError:
        fields = spec.split()
        if len(fields) != 5:
            raise ValueError(f"MUARL_CYCLE_SCHEDULE {spec!r} is neither seconds nor a 5-field crontab") from None
        minute, hour, dom, month, dow = fields
        return crontab(minute=minute, hour=hour, day_of_month=dom, month_of_year=month, day_of_week=dow)
    if seconds <= 0:
        raise ValueError(f"MUARL_CYCLE_SCHEDULE must be positive seconds, got {spec!r}")
    return schedule(timedelta(seconds=seconds))


def make_app(settings: Settings | None = None) -> Celery:
    settings = settings or get_settings()
    app = Celery("muarl", broker=broker_url(settings))
    hard = settings.cycle_step_hard_limit_s
    app.conf.update(
        task_default_queue=QUEUE,
        task_serializer="json", accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=1,
        worker_max_tasks_per_child=1,
        task_soft_time_limit=settings.cycle_step_soft_limit_s,
        task_time_limit=hard,
        broker_transport_options={"visibility_timeout": int(hard + 3600)},
        broker_connection_retry_on_startup=True,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        beat_schedule=beat_schedule(settings),
        timezone="UTC",
    )
    from rl.pipeline import tasks

    tasks.register(app)
    return app


def beat_schedule(settings: Settings) -> dict[str, Any]:
    entries: dict[str, Any] = {
        "sweep": {"task": "muarl.cycle.sweep", "schedule": schedule(timedelta(seconds=settings.cycle_sweep_interval_s)),
                  "options": {"queue": QUEUE, "expires": settings.cycle_sweep_interval_s}},
    }
    cycle_schedule = parse_schedule(settings.cycle_schedule)
    if cycle_schedule is not None:
        entries["cycle"] = {"task": "muarl.cycle.scheduled", "schedule": cycle_schedule, "options": {"queue": QUEUE}}
    return entries


_app: Celery | None = None


def get_app() -> Celery:
    global _app
    if _app is None:
        _app = make_app()
    return _app


@worker_process_init.connect
def _die_with_parent(**_: Any) -> None:
    """A pool child running a step dies with its worker (Linux): an orphan would keep training
    while a restarted worker resumes the same cycle."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@worker_ready.connect
def _recover_on_start(sender: Any = None, **_: Any) -> None:
    """A starting worker resumes a cycle whose worker died (by a task, so it runs in the pool)."""
    app = sender.app if sender is not None else get_app()
    app.send_task("muarl.cycle.recover", queue=QUEUE)
