"""Gold states for a whole task set on a few recycled sandboxes: each gold plan's writes are replayed
inside a transaction, its change set read, and the transaction rolled back.

The reward's `GoldStateCache` would otherwise copy a fresh sandbox per task for its replay; under
load a database copy costs far more than the replay itself. Tools run in savepoints inside the
caller's transaction and change tracking is transactional, so a rolled-back replay leaves the
sandbox exactly as it was and the change set equals the one a fresh copy would give. The results
seed the cache (`GoldStateCache.put`), so scoring an episode only reads the episode's own changes.

Seeding before the episodes start also means that no episode, holding its own sandbox, waits for a
second one to score: with a pool capped below the number of running episodes, that wait could
only end with the reward timeout (GRPO rollouts seed each step's tasks, rl/grpo/rollout.py).
"""

from __future__ import annotations

import asyncio

from backend.tools.registry import RETAIL
from rl.env import GoldStateCache, SandboxPool, replay_actions
from rl.env.episode import gold_spec
from rl.env.gold import GoldSpec, ensure_tools_registered
from rl.tasks.schema import Task

TASKS_PER_WORKER = 100  # a replay costs milliseconds: more sandboxes only pay for a large task set
MAX_WORKERS = 4


def _writes(actions: list[dict]) -> list[dict]:
    """The actions that can change the store: a read changes nothing, so the change set of the
    writes alone is the plan's."""
    def read(a: dict) -> bool:
        tool = RETAIL.get(a.get("name")) if isinstance(a, dict) else None
        return tool is not None and tool.read_only

    return [a for a in actions if not read(a)]


async def precompute_gold_states(tasks: list[Task], pool: SandboxPool, cache: GoldStateCache, *,
                                 upstream_compat: bool = False) -> int:
    """Seed `cache` with the gold change set of every task on `pool`'s snapshot that it does not hold
    yet (a large set on a few of the pool's sandboxes at once); returns how many were replayed."""
    ensure_tools_registered()
    specs: dict[str, GoldSpec] = {}
    for t in tasks:
        spec = gold_spec(t)
        if spec.key not in specs and not cache.has(spec, pool.snapshot, upstream_compat=upstream_compat):
            specs[spec.key] = spec
    todo = list(specs.values())
    if not todo:
        return 0
    workers = max(1, min(MAX_WORKERS, pool.size, -(-len(todo) // TASKS_PER_WORKER)))

    async def replay(share: list[GoldSpec]) -> None:
        async with pool.sandbox() as sb:
            for spec in share:
                tx = await sb.conn.begin()
                try:
                    await replay_actions(sb, _writes(spec.actions), upstream_compat=upstream_compat)
                    changes = await sb.changed_records()
                finally:
                    await tx.rollback()
                cache.put(spec, pool.snapshot, changes, upstream_compat=upstream_compat)

    await asyncio.gather(*(replay(todo[i::workers]) for i in range(workers)))
    return len(todo)
