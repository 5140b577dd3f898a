"""Sandbox environment benchmark on the tau1 retail store, side by side with tau-bench's way.

Ours (one snapshot on DATABASE_URL or the embedded PostgreSQL, a SandboxPool on it):
- acquire: `pool.acquire()` from a pool that has had time to refill (as between real episodes,
  which take seconds); the on-demand copy time when the pool is empty is printed too;
- read tool: `get_order_details` through the tool registry on a sandbox;
- write tool: `modify_pending_order_address` on a fresh sandbox each time;
- reward: `score()` after an episode that replayed a train task's gold actions, with the task's
  gold state cached (every rollout after the first of a GRPO group); the first, uncached score
  (which also replays the gold actions on another fresh sandbox) is printed too.
Baseline (bench/tau_dict_baseline.py): reset = reload the JSON files; reward = hash the data,
reload, replay the gold actions on dicts, hash again (sha256 of str() of a sorted-tuple form).
The run also checks that the baseline and our tools reach the same states on the sampled tasks.
Usage: .venv/bin/python bench/env_bench.py [-n 100] [--tasks 40] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

import tau_dict_baseline as baseline
from sqlalchemy import text

from backend.config import get_settings
from backend.logging import configure_logging
from backend.store.tau_data import read_tau_retail, retail_dir
from rl.env import GoldSpec, GoldStateCache, SandboxPool, create_snapshot, diff_stores, drop_snapshot, score
from rl.env.gold import ensure_tools_registered, replay_actions
from rl.env.reward import canonical


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


async def wait_full(pool: SandboxPool, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while pool.ready < pool.size and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


async def run(args: argparse.Namespace) -> dict:
    from backend.db.engine import database_url
    from backend.tools.registry import RETAIL

    ensure_tools_registered()
    data_dir = Path(args.data_dir or get_settings().benchmarks_dir)
    folder = retail_dir(data_dir)
    tasks = json.loads((folder / "tasks_train.json").read_text())
    rng = random.Random(args.seed)
    sample = rng.sample(range(len(tasks)), min(args.tasks, len(tasks)))
    store = read_tau_retail(data_dir)
    pending = [o for o, v in store["orders"].items() if v["status"] == "pending"]
    orders = list(store["orders"])
    n = args.n
    t: dict[str, list[float]] = {k: [] for k in (
        "acquire", "acquire_empty", "read", "write", "reward", "reward_cold", "b_reset", "b_reward")}

    snap = await create_snapshot(args.database_url or database_url(), store)
    pool = await SandboxPool(snap, size=args.pool_size).start()
    empty_pool = await SandboxPool(snap, size=0).start()
    try:
        for _ in range(n):
            await wait_full(pool)
            start = time.perf_counter()
            sb = await pool.acquire()
            t["acquire"].append(ms_since(start))
            await pool.release(sb)
        for _ in range(min(n, 20)):
            start = time.perf_counter()
            sb = await empty_pool.acquire()
            t["acquire_empty"].append(ms_since(start))
            await sb.conn.execute(text("UPDATE products SET name = name WHERE id = (SELECT min(id) FROM products)"))
            await sb.conn.commit()  # a written sandbox is dropped, not reused: the next acquire must copy
            await empty_pool.release(sb)
        await empty_pool.close()  # its drops would compete with the figures below
        await wait_full(pool)

        async with pool.sandbox() as sb:
            await wait_full(pool)  # no refill running in the background while reads are timed
            ctx = sb.tool_context(upstream_compat=True)
            for _ in range(n):
                oid = rng.choice(orders)
                start = time.perf_counter()
                res = await RETAIL.call(ctx, "get_order_details", {"order_id": oid})
                t["read"].append(ms_since(start))
                assert res.ok, res.output

        for i in range(n):
            await wait_full(pool)
            async with pool.sandbox() as sb:
                args_ = {"order_id": rng.choice(pending), "address1": f"{i} Bench Road", "address2": "",
                         "city": "Austin", "state": "TX", "country": "USA", "zip": "73301"}
                ctx = sb.tool_context(upstream_compat=True)
                start = time.perf_counter()
                res = await RETAIL.call(ctx, "modify_pending_order_address", args_)
                t["write"].append(ms_since(start))
                assert res.ok, res.output

        cache = GoldStateCache()
        mismatches = 0
        for idx in sample:
            gold = GoldSpec.from_tau_task(f"train/{idx}", tasks[idx])
            await wait_full(pool)
            async with pool.sandbox() as sb:
                await replay_actions(sb, gold.actions, upstream_compat=True)
                start = time.perf_counter()
                cold = await score(sb, gold, [], cache=cache, upstream_compat=True)
                t["reward_cold"].append(ms_since(start))
                start = time.perf_counter()
                warm = await score(sb, gold, [], cache=cache, upstream_compat=True)
                t["reward"].append(ms_since(start))
                assert cold.reward == warm.reward == 1.0, warm.explain()
                ours = await sb.changed_records()
            # the baseline, on the same task
            start = time.perf_counter()
            data = baseline.load_data(folder)
            t["b_reset"].append(ms_since(start))
            for action in gold.actions:
                baseline.step(data, action["name"], action["kwargs"])
            start = time.perf_counter()
            b_reward = baseline.reward(data, folder, gold.actions)
            t["b_reward"].append(ms_since(start))
            assert b_reward == 1.0
            if canonical(diff_stores(snap.initial, data)) != canonical(ours):
                mismatches += 1
    finally:
        await empty_pool.close()
        await pool.close()
        await drop_snapshot(snap)

    p50 = {k: statistics.median(v) for k, v in t.items()}
    p95 = {k: pct(v, 0.95) for k, v in t.items()}
    return {"p50": p50, "p95": p95, "mismatches": mismatches, "tasks": len(sample), "n": n}


def report(r: dict) -> dict:
    p50 = r["p50"]
    return {
        "acquire_p50_ms": round(p50["acquire"], 3),
        "read_tool_p50_ms": round(p50["read"], 3),
        "write_tool_p50_ms": round(p50["write"], 3),
        "reward_p50_ms": round(p50["reward"], 3),
        "baseline": {"reset_p50_ms": round(p50["b_reset"], 3), "reward_p50_ms": round(p50["b_reward"], 3)},
        "reward_speedup": round(p50["b_reward"] / p50["reward"], 1),
    }


def print_table(r: dict) -> None:
    p50, p95 = r["p50"], r["p95"]
    rows = [
        ("sandbox acquire (ready pool)", "acquire", "reset (reload JSON)", "b_reset"),
        ("sandbox acquire (empty pool: copy now)", "acquire_empty", None, None),
        ("read tool get_order_details", "read", None, None),
        ("write tool modify_pending_order_address", "write", None, None),
        ("reward (gold state cached)", "reward", "reward (hash+reload+replay+hash)", "b_reward"),
        ("reward (first: gold replayed on a new sandbox)", "reward_cold", "reward", "b_reward"),
    ]
    print(f"{'ours':48} {'p50 ms':>8} {'p95 ms':>8}   {'baseline':34} {'p50 ms':>8} {'p95 ms':>8} {'ratio':>7}")
    for label, key, b_label, b_key in rows:
        line = f"{label:48} {p50[key]:8.2f} {p95[key]:8.2f}"
        if b_key:
            line += f"   {b_label:34} {p50[b_key]:8.2f} {p95[b_key]:8.2f} {p50[b_key] / p50[key]:6.1f}x"
        print(line)
    print(f"(n={r['n']} per figure, {r['tasks']} train tasks for rewards; "
          f"baseline and our tools reached different states on {r['mismatches']} of them)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=100, help="samples per figure")
    ap.add_argument("--tasks", type=int, default=40, help="train tasks sampled for the reward figures")
    ap.add_argument("--pool-size", type=int, default=4)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    configure_logging("WARNING")
    result = asyncio.run(run(args))
    if args.json:
        sys.stdout.write(json.dumps(report(result)) + "\n")
    else:
        print_table(result)
        print(json.dumps(report(result)))


if __name__ == "__main__":
    main()
