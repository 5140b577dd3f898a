"""Benchmark: the chat API's own overhead per turn, with a zero-latency fake model.

Starts, each in its own process, a fake OpenAI-compatible server that answers instantly
(`tests/fakes/openai_server.py`, "bench" responder: it looks up the email or order the
customer mentions, then answers in text) and `muarl serve` on a private copy of the tau
retail store. Then N concurrent conversations (default 100) each send a few messages (an
email -> a lookup, an order id -> a lookup, a thank-you -> text only). Every reply carries
`Server-Timing: overhead;dur=..., model;dur=...`: overhead is the turn's time in the API
minus the time spent waiting for the model (the fake's answer and the HTTP client around
it), i.e. what this service adds to a turn: auth, turn lease, rate limit, history, tool
calls, persistence. Targets (issue 4): p50 <= 10 ms, p99 <= 50 ms, no errors, with 100
concurrent conversations on 2 cores. `--think-ms` adds a pause between a reply and the
customer's next message (default 3000 ms, spread 0.5-1.5x, arrivals spread over the first
pause; 0 = back to back, which with a zero-latency model saturates the machine and measures
queueing, not overhead); `--json` prints one JSON object.

    .venv/bin/python bench/api_bench.py [--conversations 100] [--turns 3] [--think-ms 3000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from processes import stop_all

PROJECT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT))

from backend.config import get_settings  # noqa: E402
from backend.db.engine import make_engine  # noqa: E402
from backend.db.testing import TestDatabases  # noqa: E402
from backend.store.tau_data import load_store, read_tau_retail  # noqa: E402

_TIMING = re.compile(r"(\w+);dur=([\d.]+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


async def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{url} exited with {proc.returncode}")
            try:
                if (await client.get(url)).status_code < 500:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def pick_customers(data: dict[str, Any], n: int) -> list[tuple[str, str]]:
    """(email, an order id) of n customers (cycling when there are fewer)."""
    people = [(u["email"], u["orders"][0]) for u in data["users"].values() if u["orders"]]
    return [people[i % len(people)] for i in range(n)]


async def conversation(client: httpx.AsyncClient, email: str, order_id: str, turns: int, think_s: float,
                       results: dict[str, list[Any]], rng: random.Random) -> None:
    if think_s:  # customers arrive spread over one think time, not all in the same millisecond
        await asyncio.sleep(rng.uniform(0, think_s))
    r = await client.post("/v1/conversations")
    if r.status_code != 201:
        results["errors"].append(f"start {r.status_code}")
        return
    body = r.json()
    headers = {"Authorization": f"Bearer {body['token']}"}
    messages = [f"Hi, my email is {email}", f"What's the status of order {order_id}?", "Thanks, that's all."]
    for i in range(turns):
        content = messages[i % len(messages)]
        start = time.perf_counter()
        r = await client.post(f"/v1/conversations/{body['id']}/messages", json={"content": content},
                              headers=headers)
        wall = (time.perf_counter() - start) * 1000
        if r.status_code != 200 or r.json().get("notice"):
            results["errors"].append(f"turn {r.status_code} {r.text[:120]}")
            continue
        timing = dict(_TIMING.findall(r.headers.get("server-timing", "")))
        results["overhead"].append(float(timing["overhead"]))
        results["model"].append(float(timing["model"]))
        results["wall"].append(wall)
        if think_s:  # reading the reply and typing the next message
            await asyncio.sleep(think_s * rng.uniform(0.5, 1.5))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    data = read_tau_retail(Path(args.data_dir or get_settings().benchmarks_dir))
    dbs = TestDatabases()
    procs: list[subprocess.Popen] = []
    try:
        url = await dbs.create("api_bench")
        engine = make_engine(url, null_pool=True)
        async with engine.begin() as conn:
            await load_store(conn, data)
        await engine.dispose()

        llm_port, api_port = free_port(), free_port()
        env = {**os.environ, "PYTHONPATH": str(PROJECT), "DATABASE_URL": url,
               "MUARL_LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1", "MUARL_LLM_MODEL": "fake-model",
               "MUARL_LLM_MAX_RETRIES": "0", "MUARL_API_RATE_LIMIT_PER_MINUTE": "100000",
               # every simulated customer comes from this one address: the per-client quotas stay off
               "MUARL_RATE_CONVERSATIONS_PER_HOUR": "0", "MUARL_RATE_MESSAGES_PER_HOUR": "0",
               "MUARL_API_DB_POOL_SIZE": str(args.pool), "MUARL_LOG_LEVEL": "WARNING"}
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.fakes.openai_server", "--port", str(llm_port)],
                                      cwd=PROJECT, env=env))
        procs.append(subprocess.Popen([str(Path(sys.executable).parent / "muarl"), "serve", "--port",
                                       str(api_port), "--workers", str(args.workers)], cwd=PROJECT, env=env))
        await wait_ready(f"http://127.0.0.1:{llm_port}/v1/models", procs[0])
        await wait_ready(f"http://127.0.0.1:{api_port}/readyz", procs[1])

        limits = httpx.Limits(max_connections=args.conversations + 10, max_keepalive_connections=args.conversations)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", limits=limits, timeout=60) as client:
            customers = pick_customers(data, args.conversations)
            warm: dict[str, list[Any]] = {"overhead": [], "model": [], "wall": [], "errors": []}
            rng = random.Random(0)
            await asyncio.gather(*(conversation(client, e, o, 1, 0, warm, rng) for e, o in customers[:10]))
            results: dict[str, list[Any]] = {"overhead": [], "model": [], "wall": [], "errors": []}
            start, cpu_start = time.perf_counter(), cpu_seconds(procs[1].pid)
            await asyncio.gather(*(conversation(client, e, o, args.turns, args.think_ms / 1000, results, rng)
                                   for e, o in customers))
            elapsed, api_cpu = time.perf_counter() - start, cpu_seconds(procs[1].pid) - cpu_start
    finally:
        stop_all(procs)
        await dbs.close()

    o, m, w = results["overhead"], results["model"], results["wall"]
    return {
        "conversations": args.conversations, "turns_per_conversation": args.turns, "think_ms": args.think_ms,
        "cpus": os.cpu_count(), "turns": len(o), "errors": len(results["errors"]),
        "error_examples": results["errors"][:3], "turns_per_s": round(len(o) / elapsed, 1),
        "api_cpu_ms_per_turn": round(api_cpu * 1000 / max(1, len(o)), 2),
        "overhead_p50_ms": round(percentile(o, 50), 2), "overhead_p99_ms": round(percentile(o, 99), 2),
        "overhead_mean_ms": round(statistics.fmean(o), 2) if o else None,
        "model_p50_ms": round(percentile(m, 50), 2), "wall_p50_ms": round(percentile(w, 50), 2),
        "wall_p99_ms": round(percentile(w, 99), 2),
        "targets_met": bool(o) and not results["errors"] and percentile(o, 50) <= 10 and percentile(o, 99) <= 50,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="chat API overhead per turn")
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--think-ms", type=float, default=3000.0,
                        help="a customer's pause between a reply and the next message (0: back to back)")
    parser.add_argument("--pool", type=int, default=20, help="API database pool size")
    parser.add_argument("--workers", type=int, default=1, help="API server processes")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = asyncio.run(run(args))
    if args.json:
        print(json.dumps(report))
        return
    print(f"chat API overhead: {report['conversations']} concurrent conversations x {report['turns_per_conversation']} "
          f"turns, think time {report['think_ms']} ms, {report['cpus']} CPUs")
    print(f"  turns {report['turns']}  errors {report['errors']}  throughput {report['turns_per_s']} turns/s  "
          f"API process CPU {report['api_cpu_ms_per_turn']} ms/turn")
    print(f"  overhead per turn (excl. model)  p50 {report['overhead_p50_ms']} ms  p99 {report['overhead_p99_ms']} ms"
          f"   (targets: p50 <= 10, p99 <= 50)")
    print(f"  model time p50 {report['model_p50_ms']} ms;  client wall p50 {report['wall_p50_ms']} ms  "
          f"p99 {report['wall_p99_ms']} ms")
    print(f"  targets met: {report['targets_met']}")
    if report["error_examples"]:
        print(f"  errors, e.g.: {report['error_examples']}")


if __name__ == "__main__":
    main()
