"""Episode-environment benchmark: what one interactive episode costs without any LLM.

On the tau retail store (a snapshot on DATABASE_URL / --database-url, else the embedded PostgreSQL)
it generates tasks of every category, seeds the gold states (one rolled-back replay each), then:
1. overhead: episodes one after another (oracle agent, scripted customer, real tools on a sandbox
   from a pool, reward and TCR); per episode the sandbox acquire and the episode itself (agent,
   customer, tools, reward), p50 / p95;
2. parallel: `--parallel` episodes (default 64) started at once on a pool of that size; wall time,
   episodes per second, and every error or excluded episode.
Usage: .venv/bin/python bench/episode_bench.py [--episodes 100] [--parallel 64] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from backend.config import get_settings
from backend.db.engine import database_url, normalize_url
from backend.store.tau_data import read_tau_retail
from rl.env import GoldStateCache, SandboxPool, create_snapshot, drop_snapshot
from rl.env.episode import run_episode
from rl.env.gold_states import precompute_gold_states
from rl.policies.oracle import OraclePolicy
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 2)


async def main(args: argparse.Namespace) -> dict:
    data = read_tau_retail(get_settings().benchmarks_dir)
    server = normalize_url(args.database_url) if args.database_url else database_url()
    n_tasks = max(args.episodes, args.parallel)
    tasks = generate_tasks(data, n_tasks, seed=args.seed, snapshot="tau-retail")
    snap = await create_snapshot(server, data)
    policy, user = OraclePolicy(), ScriptedCustomer()
    out: dict = {"episodes": args.episodes, "parallel": args.parallel}
    try:
        cache = GoldStateCache()
        async with SandboxPool(snap, size=4) as pool:
            t0 = time.perf_counter()
            await precompute_gold_states(tasks, pool, cache)
            out["gold_seed_ms_per_task"] = round((time.perf_counter() - t0) * 1000 / len(tasks), 2)
            acquire, episode, parts = [], [], {"agent": [], "user": [], "tools": [], "reward": []}
            rewards = []
            for task in tasks[: args.episodes]:
                await asyncio.sleep(args.gap_s)  # time between episodes, as a trainer's would have
                t0 = time.perf_counter()
                sb = await pool.acquire()
                acquire.append((time.perf_counter() - t0) * 1000)
                try:
                    traj = await run_episode(task, policy, user, sb, cache=cache)
                finally:
                    await pool.release(sb)
                episode.append(traj.timings_ms["total"])
                for k in parts:
                    parts[k].append(traj.timings_ms[k])
                rewards.append(traj.reward or 0.0)
            total = [a + e for a, e in zip(acquire, episode, strict=True)]
            out["overhead"] = {
                "episode_p50_ms": pct(total, 0.5), "episode_p95_ms": pct(total, 0.95),
                "acquire_p50_ms": pct(acquire, 0.5), "run_p50_ms": pct(episode, 0.5),
                **{f"{k}_p50_ms": pct(v, 0.5) for k, v in parts.items()},
                "mean_reward": round(statistics.fmean(rewards), 4),
            }
        async with SandboxPool(snap, size=args.parallel) as pool:
            batch = tasks[: args.parallel]

            async def one(task):
                async with pool.sandbox() as sb:
                    return await run_episode(task, policy, user, sb, cache=cache)

            t0 = time.perf_counter()
            results = await asyncio.gather(*(one(t) for t in batch), return_exceptions=True)
            wall = time.perf_counter() - t0
            errors = [repr(r) for r in results if isinstance(r, BaseException)]
            trajs = [r for r in results if not isinstance(r, BaseException)]
            out["parallel_run"] = {
                "wall_s": round(wall, 3), "episodes_per_s": round(len(batch) / wall, 2),
                "errors": errors, "excluded": [t.excluded for t in trajs if t.excluded],
                "mean_reward": round(statistics.fmean(t.reward or 0.0 for t in trajs), 4) if trajs else None,
            }
    finally:
        await drop_snapshot(snap)
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--parallel", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gap-s", type=float, default=0.05, help="pause between sequential episodes")
    p.add_argument("--database-url", default=None)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    result = asyncio.run(main(a))
    if a.json:
        print(json.dumps(result))
    else:
        o = result["overhead"]
        print(f"per episode (oracle + scripted customer, no LLM): p50 {o['episode_p50_ms']} ms, "
              f"p95 {o['episode_p95_ms']} ms  [acquire {o['acquire_p50_ms']}, agent {o['agent_p50_ms']}, "
              f"customer {o['user_p50_ms']}, tools {o['tools_p50_ms']}, reward {o['reward_p50_ms']}] "
              f"mean reward {o['mean_reward']}")
        r = result["parallel_run"]
        print(f"{result['parallel']} episodes at once: {r['wall_s']} s ({r['episodes_per_s']}/s), "
              f"errors {len(r['errors'])}, excluded {len(r['excluded'])}, mean reward {r['mean_reward']}")
