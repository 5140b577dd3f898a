"""Gold states for a whole task set on ONE sandbox: each gold plan is replayed inside a transaction,
its change set read, and the transaction rolled back.

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

from rl.env import GoldStateCache, SandboxPool, replay_actions
from rl.env.episode import gold_spec
from rl.tasks.schema import Task


async def precompute_gold_states(tasks: list[Task], pool: SandboxPool, cache: GoldStateCache, *,
                                 upstream_compat: bool = False) -> int:
    """Seed `cache` with the gold change set of every task on `pool`'s snapshot that it does not hold
    yet; returns how many were replayed."""
    done: set[str] = set()
    todo = [t for t in tasks if not cache.has(gold_spec(t), pool.snapshot, upstream_compat=upstream_compat)]
    if not todo:
        return 0
    async with pool.sandbox() as sb:
        for task in todo:
            spec = gold_spec(task)
            if spec.key in done:
                continue
            tx = await sb.conn.begin()
            try:
                await replay_actions(sb, spec.actions, upstream_compat=upstream_compat)
                changes = await sb.changed_records()
            finally:
                await tx.rollback()
            cache.put(spec, pool.snapshot, changes, upstream_compat=upstream_compat)
            done.add(spec.key)
    return len(done)
