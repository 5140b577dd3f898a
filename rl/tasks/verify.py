"""Replaying task gold plans through the real tools on sandboxes, to prove they run cleanly.

Each task's gold actions run in order as staff inside a transaction on a sandbox of its snapshot,
rolled back afterwards (the next task sees the pristine store, as on a fresh copy); every write must
succeed (reads may legitimately fail in imported tau tasks, so only writes are checked). Returns
the problems as (task id, message) pairs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rl.env import Snapshot, replay_actions
from rl.env.pools import StorePools
from rl.tasks.schema import Task
from rl.tasks.tools_meta import WRITE_TOOLS


async def verify_gold(tasks: list[Task], *, server_url: str | None = None, data_dir: Path | None = None,
                      snapshots: dict[str, Snapshot] | None = None, concurrency: int = 4) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    sem = asyncio.Semaphore(concurrency)
    async with StorePools(server_url, size=min(concurrency, len(tasks)), snapshots=snapshots,
                          data_dir=data_dir) as stores:
        pools = {ref: await stores.pool(ref) for ref in sorted({t.snapshot for t in tasks})}

        async def replay_all(chunk: list[Task]) -> None:
            async with sem, pools[chunk[0].snapshot].sandbox() as sb:
                for task in chunk:
                    actions = [{"name": a.name, "arguments": a.arguments} for a in task.gold_actions]
                    tx = await sb.conn.begin()
                    try:
                        results = await replay_actions(sb, actions, upstream_compat=False)
                    finally:
                        await tx.rollback()
                    for a, r in zip(task.gold_actions, results, strict=True):
                        if r is not None and a.name in WRITE_TOOLS and not r.ok:
                            problems.append((task.id, f"{a.name} failed: {r.output}"))

        chunks = [[t for t in tasks if t.snapshot == ref][i::concurrency] for ref in pools for i in range(concurrency)]
        await asyncio.gather(*(replay_all(c) for c in chunks if c))
    return problems
