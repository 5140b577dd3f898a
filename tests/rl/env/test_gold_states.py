"""Gold states replayed in rolled-back transactions on one sandbox equal fresh-copy replays."""

from __future__ import annotations

from rl.env import GoldStateCache
from rl.env.episode import gold_spec
from rl.env.gold_states import precompute_gold_states


async def test_rolled_back_replays_equal_fresh_replays(generated_tasks, retail_pool):
    tasks = [t for t in generated_tasks if t.gold_writes][:8]
    seeded = GoldStateCache()
    assert await precompute_gold_states(tasks, retail_pool, seeded) == len(tasks)
    assert seeded.replays == 0
    fresh = GoldStateCache()
    snap = retail_pool.snapshot
    for t in tasks:
        expected = await fresh.get(gold_spec(t), snap, upstream_compat=False)  # a fresh copy per task
        got = await seeded.get(gold_spec(t), snap, upstream_compat=False)
        assert got == expected and any(expected.values())
    assert seeded.replays == 0 and fresh.replays == len(tasks)
    async with retail_pool.sandbox() as sb:  # and the replay sandbox's neighbours are untouched
        assert not any((await sb.changed_records()).values())
