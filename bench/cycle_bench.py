"""Benchmark of the online cycle on the tau retail store.

`--part snapshot` (default): how long the cycle's first step takes, a snapshot of a live store
(`rl.env.snapshot.snapshot_from_database`: a copy of the cached schema template, the store's
tables streamed with COPY in one read-only transaction, change tracking, freeze, template).
The schema template's one-time cost is printed apart. Target: well under 2 s.

`--part cycle`: whole cycles (`--cycles N`, default 1; the first one cold-starts, later ones train
GRPO from the champion) with `--recipe` (default `smoke`; `cpu-tiny` is the product's, target <= 60
min on 2 cores; `--first-recipe first-model` trains the first cycle as `make run` does) on a live
store that 20 customers (`--conversations`) chat with the whole time, through `muarl serve` and a
zero-latency fake model that looks up their orders (read-only turns, so any change to the store's
rows is the cycle's; after a promotion the API asks the fake model too, under the champion's name).
Prints the wall time per step and per cycle, the chat turns served and failed, and the store's rows
changed by the cycle (a checksum of every store table before and after; target 0). The cycle's steps
run in this process (`rl.pipeline.runner.run_step`, what the Celery tasks call), promotion loads the
model on a real `muarl model-server`.

    .venv/bin/python bench/cycle_bench.py [--part snapshot|cycle] [-n 5] [--recipe smoke] [--cycles 1] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "bench"))

from api_bench import conversation, free_port, pick_customers, wait_ready  # noqa: E402
from processes import stop_all  # noqa: E402

from backend.config import Settings, get_settings  # noqa: E402
from backend.db.engine import make_engine  # noqa: E402
from backend.db.testing import TestDatabases  # noqa: E402
from backend.store.checksum import store_checksum  # noqa: E402
from backend.store.tau_data import load_store, read_tau_retail  # noqa: E402


async def live_store(dbs: TestDatabases, data: dict[str, Any]) -> str:
    url = await dbs.create("cycle_bench")
    engine = make_engine(url, null_pool=True)
    async with engine.begin() as conn:
        await load_store(conn, data)
    await engine.dispose()
    return url


async def checksum(url: str) -> dict[str, str]:
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return await store_checksum(conn)
    finally:
        await engine.dispose()


async def bench_snapshot(args: argparse.Namespace, data: dict[str, Any]) -> dict[str, Any]:
    from rl.env.snapshot import drop_snapshot, schema_template, snapshot_from_database

    dbs = TestDatabases()
    try:
        url = await live_store(dbs, data)
        t0 = time.perf_counter()
        await schema_template(dbs.server_url)
        template_s = time.perf_counter() - t0
        times = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            snap = await snapshot_from_database(dbs.server_url, url)
            times.append(time.perf_counter() - t0)
            await drop_snapshot(snap)
    finally:
        await dbs.close()
    return {"part": "snapshot", "users": len(data["users"]), "orders": len(data["orders"]), "runs": args.n,
            "schema_template_first_use_s": round(template_s, 3), "snapshot_p50_s": round(statistics.median(times), 3),
            "snapshot_min_s": round(min(times), 3), "snapshot_max_s": round(max(times), 3),
            "load_average": os.getloadavg()[0], "target_met": statistics.median(times) < 2.0}


async def chat_forever(port: int, data: dict[str, Any], n: int, stop: asyncio.Event) -> dict[str, Any]:
    results: dict[str, list[Any]] = {"overhead": [], "model": [], "wall": [], "errors": []}
    rng = random.Random(0)
    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=60) as client:
        async def customer(email: str, order: str) -> None:
            while not stop.is_set():
                await conversation(client, email, order, 3, 1.0, results, rng)

        await asyncio.gather(*(customer(e, o) for e, o in pick_customers(data, n)))
    return {"turns": len(results["wall"]), "errors": len(results["errors"]),
            "error_examples": results["errors"][:3]}


async def bench_cycle(args: argparse.Namespace, data: dict[str, Any]) -> dict[str, Any]:
    from backend.cycles import create_cycle, cycle_json, get_cycle
    from backend.db.cycle_models import STEPS
    from rl.pipeline.runner import run_step

    dbs = TestDatabases()
    procs: list[subprocess.Popen] = []
    var = Path(args.var_dir or (PROJECT / "var" / "cycle_bench")).resolve()
    try:
        url = await live_store(dbs, data)
        llm_port, api_port, engine_port = free_port(), free_port(), free_port()
        env = {**os.environ, "PYTHONPATH": str(PROJECT), "DATABASE_URL": url,
               "MUARL_LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1", "MUARL_LLM_MODEL": "fake-model",
               "MUARL_LLM_MAX_RETRIES": "0", "MUARL_API_RATE_LIMIT_PER_MINUTE": "100000",
               # the 20 customers share one address: per-client quotas would refuse all but a few
               "MUARL_RATE_CONVERSATIONS_PER_HOUR": "0", "MUARL_RATE_MESSAGES_PER_HOUR": "0",
               "MUARL_LOG_LEVEL": "WARNING"}
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.fakes.openai_server", "--port", str(llm_port)],
                                      cwd=PROJECT, env=env))
        # after a promotion chat asks the champion's engine: for the API that "engine" is the fake
        # model too, so customers stay read-only and any change to the store is the cycle's
        serve_env = {**env, "MUARL_MODEL_SERVER_URL": f"http://127.0.0.1:{llm_port}/v1"}
        procs.append(subprocess.Popen([sys.executable, "-m", "backend.cli", "serve", "--port", str(api_port)],
                                      cwd=PROJECT, env=serve_env))
        procs.append(subprocess.Popen([sys.executable, "-m", "backend.cli", "model-server", "--port",
                                       str(engine_port), "--threads", "1"], cwd=PROJECT, env=env))
        await wait_ready(f"http://127.0.0.1:{llm_port}/v1/models", procs[0])
        await wait_ready(f"http://127.0.0.1:{api_port}/readyz", procs[1])
        await wait_ready(f"http://127.0.0.1:{engine_port}/v1/models", procs[2], timeout=120)
        settings = Settings(DATABASE_URL=url, MUARL_VAR_DIR=str(var),
                            MUARL_MODEL_SERVER_URL=f"http://127.0.0.1:{engine_port}/v1")
        before = await checksum(url)
        stop = asyncio.Event()
        chat = asyncio.create_task(chat_forever(api_port, data, args.conversations, stop))
        engine = make_engine(url, null_pool=True)
        cycles = []
        try:
            for i in range(args.cycles):
                # as `make run` does: its first cycle trains the `first-model` recipe, later ones the
                # scheduled recipe (GRPO from the champion once there is one)
                recipe = args.first_recipe if i == 0 and args.first_recipe else args.recipe
                overrides = [] if recipe != args.recipe else args.set or []
                cycle = await create_cycle(engine, recipe, overrides=overrides, trigger="bench")
                t0 = time.perf_counter()
                for step in STEPS:
                    if not await asyncio.to_thread(run_step, cycle.id, step, settings):
                        break
                state = cycle_json(await get_cycle(engine, cycle.id))
                cycles.append({"cycle_id": cycle.id, "recipe": recipe, "status": state["status"],
                               "error": state["error"], "champion": state.get("champion"),
                               "wall_s": round(time.perf_counter() - t0, 1),
                               "steps_s": {e["step"]: e["seconds"] for e in state["events"]
                                           if e["event"] == "step.finished"},
                               "candidate": state["candidate"], "gate_passed": state["gate_passed"],
                               "promoted": state["promoted"]})
        finally:
            stop.set()
            chatted = await chat
            await engine.dispose()
        after = await checksum(url)
    finally:
        stop_all(procs)
        await dbs.close()
    changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
    return {"part": "cycle", "recipe": args.recipe, "conversations": args.conversations, "cycles": cycles,
            "chat": chatted, "store_tables_changed": len(changed), "changed": changed,
            "load_average": os.getloadavg()[0],
            "target_met": not changed and all(c["status"] == "succeeded" for c in cycles)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=["snapshot", "cycle"], default="snapshot")
    p.add_argument("-n", type=int, default=5, help="snapshots to time")
    p.add_argument("--recipe", default="smoke")
    p.add_argument("--set", action="append", help="recipe setting KEY=VALUE")
    p.add_argument("--cycles", type=int, default=1)
    p.add_argument("--first-recipe", help="the first cycle's recipe (make run: first-model); later cycles use --recipe")
    p.add_argument("--conversations", type=int, default=20)
    p.add_argument("--data-dir", type=Path)
    p.add_argument("--var-dir", type=Path, help="where cycles write (default var/cycle_bench)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    from backend.logging import configure_logging

    configure_logging()
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per chat request otherwise
    data = read_tau_retail(Path(args.data_dir or get_settings().benchmarks_dir))
    run = bench_snapshot if args.part == "snapshot" else bench_cycle
    result = asyncio.run(run(args, data))
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
