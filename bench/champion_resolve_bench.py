"""What resolving the champion once per chat turn costs, and how fast a promotion reaches it.

On a throwaway database (the embedded PostgreSQL, or TEST_DATABASE_URL / DATABASE_URL):
- cached: `ChampionResolver.resolve()` with its LISTEN connection up and nothing changed (what
  almost every turn pays);
- uncached: the same without the listener, so every call reads the champion from the database
  (what every turn pays while the listener reconnects);
- switch: from a promotion's commit (another connection, as `muarl models promote` or the ops API
  would) to the first `resolve()` that returns the new version, polling every 0.5 ms.
Usage: .venv/bin/python bench/champion_resolve_bench.py [-n 20000] [--switches 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backend.config import Settings  # noqa: E402
from backend.db.engine import make_engine  # noqa: E402
from backend.db.testing import TestDatabases  # noqa: E402
from backend.serving.champion import ChampionResolver  # noqa: E402
from backend.serving.registry import ModelRegistry, NewVersion  # noqa: E402


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


async def main(n: int, switches: int) -> None:
    dbs = TestDatabases()
    url = await dbs.create("bench_champion")
    engine = make_engine(url, pool_size=4)
    writer = make_engine(url, null_pool=True)
    settings = Settings(DATABASE_URL=url, MUARL_LLM_BASE_URL=None, MUARL_LLM_MODEL=None)
    try:
        reg = ModelRegistry(writer)
        versions = [await reg.register(NewVersion(name=f"m{i}", artifact_uri="/models/m", engine="local"),
                                       actor="bench") for i in range(2)]
        await reg.switch_champion(versions[0].id, actor="bench", reason="bench", skip_gates=True)

        listening = await ChampionResolver(engine, settings).start()
        await listening.resolve()
        start = time.perf_counter()
        for _ in range(n):
            await listening.resolve()
        cached_us = (time.perf_counter() - start) / n * 1e6
        print(f"cached resolve: {cached_us:.2f} us per turn ({listening.lookups} database reads for {n + 1} turns)")

        polling = ChampionResolver(engine, settings)  # never started: no listener
        m = max(200, n // 40)
        start = time.perf_counter()
        for _ in range(m):
            await polling.resolve()
        print(f"uncached resolve (no listener): {(time.perf_counter() - start) / m * 1e3:.3f} ms per turn")
        await polling.close()

        lags = []
        for i in range(switches):
            target = versions[(i + 1) % 2].id
            await reg.switch_champion(target, actor="bench", reason="bench", skip_gates=True)
            committed = time.perf_counter()
            while (await listening.resolve()).version_id != target:  # type: ignore[union-attr]
                await asyncio.sleep(0.0005)
            lags.append((time.perf_counter() - committed) * 1e3)
        print(f"promotion commit -> resolved by the next turn: p50 {statistics.median(lags):.2f} ms, "
              f"p95 {pct(lags, 0.95):.2f} ms, max {max(lags):.2f} ms over {switches} switches")
        await listening.close()
    finally:
        await engine.dispose()
        await writer.dispose()
        await dbs.close()


if __name__ == "__main__":
    os.environ.setdefault("MUARL_LOG_LEVEL", "WARNING")
    from backend.logging import configure_logging

    configure_logging()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20000)
    parser.add_argument("--switches", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.switches))
