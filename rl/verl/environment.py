"""The episode environment a verl rollout worker plays in: a sandbox pool on one snapshot of the
store, the tasks by id, the simulated customer and the gold-state cache.

verl builds a new agent-loop object for every sample, so the environment is per process: the
first rollout of a worker builds it (`environment(spec)`) and later ones reuse it. `spec` is the
loop's `env` kwarg from agent_loops.yaml: the task file, the user simulator (`scripted` or
`llm:MODEL`, an OpenAI-compatible endpoint from the MUARL_* settings) and the pool size; the
database server is `MUARL_DATABASE_URL` and the store is the tau retail data under
`MUARL_BENCHMARKS_DIR`. Tests (and any embedding program) `install` a ready environment under a
name instead.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from rl.env.episode import EpisodeLimits
from rl.env.gold import GoldStateCache
from rl.env.sandbox import SandboxPool
from rl.simulator.base import UserSimulator, make_user
from rl.tasks.schema import Task, load_tasks


@dataclass
class VerlEnvironment:
    pool: SandboxPool
    tasks: dict[str, Task]
    user: UserSimulator
    cache: GoldStateCache = field(default_factory=GoldStateCache)
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)


_INSTALLED: dict[str, VerlEnvironment] = {}
_BUILDING: dict[str, asyncio.Future[VerlEnvironment]] = {}


def install(name: str, env: VerlEnvironment) -> None:
    """Make `env` the environment of loops whose `env.name` is `name` (tests, embedding programs)."""
    _INSTALLED[name] = env


def uninstall(name: str) -> None:
    _INSTALLED.pop(name, None)


async def environment(spec: dict[str, Any]) -> VerlEnvironment:
    """The process's environment for `spec` (built once, on first use)."""
    name = str(spec.get("name") or "default")
    if name in _INSTALLED:
        return _INSTALLED[name]
    fut = _BUILDING.get(name)
    if fut is None:
        fut = _BUILDING[name] = asyncio.ensure_future(_build(spec))
    try:
        env = await asyncio.shield(fut)
    except BaseException:
        _BUILDING.pop(name, None)
        raise
    _INSTALLED[name] = env
    return env


async def _build(spec: dict[str, Any]) -> VerlEnvironment:
    from backend.config import get_settings
    from backend.db.engine import database_url
    from backend.store.tau_data import read_tau_retail
    from rl.env.snapshot import create_snapshot

    if not spec.get("tasks"):
        raise ValueError("the verl agent loop needs env.tasks (a muarl task file) in agent_loops.yaml")
    tasks = {t.id: t for t in load_tasks(spec["tasks"])}
    data = read_tau_retail(get_settings().benchmarks_dir)
    snapshot = await create_snapshot(database_url(), data)
    pool = await SandboxPool(snapshot, size=int(spec.get("pool_size", 8))).start()
    limits = EpisodeLimits(max_turns=int(spec.get("max_turns", 30)))
    return VerlEnvironment(pool=pool, tasks=tasks, user=make_user(str(spec.get("user", "scripted"))),
                           limits=limits)
