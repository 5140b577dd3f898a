"""Benchmark: promotion and rollback under load, against the local engine.

Builds a tiny Qwen3 checkpoint here (tests/rl/serving/tiny_checkpoint.py: a few seconds of SFT) and a
LoRA adapter for it, registers both (engine `local`), starts `muarl model-server` serving the base and
`muarl serve` on a private copy of the tau retail store, promotes the base, and lets N concurrent
conversations (default 50) chat, each pausing `--think-ms` (x0.5-1.5) between a reply and its next
message (0: back to back). Then, `--cycles` times: promote the adapter through
`POST /v1/ops/models/{id}/promote` (which loads it into the model server first), wait until every
conversation has had a reply from it, and roll back with `POST /v1/ops/rollback` likewise.

Measured (targets of issue 20):
- switch latency: per switch, the time from the ops call returning to the first reply by the new
  version (p50 over switches <= 1 s); also per conversation (which includes the customer's pause and
  the turn it had running, answered by the old version as it should be);
- failed customer requests: non-200 answers and replies saying the model was unavailable (0);
- mixed turns: turns whose assistant messages in the transcript come from more than one version (0);
- stale turns: turns sent after a switch returned but answered by the version it replaced.

    .venv/bin/python bench/promotion_bench.py [--conversations 50] [--cycles 2] [--json]
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
import tempfile
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
from backend.serving.registry import ModelRegistry  # noqa: E402
from backend.store.tau_data import load_store, read_tau_retail  # noqa: E402
from bench.api_bench import free_port, percentile, wait_ready  # noqa: E402
from tests.rl.serving.tiny_checkpoint import build_checkpoints  # noqa: E402

OPS_TOKEN = "bench-ops-token"
OPS = {"Authorization": f"Bearer {OPS_TOKEN}", "X-Ops-Actor": "promotion-bench"}
# the tiny model reads a short, compact tool list (its view), so prompts stay small
VIEW = {"tools": ["find_user_id_by_email", "get_order_details", "get_user_details"], "compact": True}
MESSAGES = ["Where is order #W1003?", "Can you check again?", "Thanks!"]


class Replies:
    """Every customer request: (conversation, sent, received, status, version, ended_by)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float, int, str | None, str]] = []
        self.stop = False


async def customer(client: httpx.AsyncClient, replies: Replies, index: int, think_s: float) -> tuple[str, str]:
    rng = random.Random(index)
    await asyncio.sleep(rng.uniform(0, think_s))  # customers arrive spread over one think time
    r = await client.post("/v1/conversations")
    r.raise_for_status()
    body = r.json()
    headers = {"Authorization": f"Bearer {body['token']}"}
    n = 0
    while not replies.stop:
        sent = time.perf_counter()
        try:
            r = await client.post(f"/v1/conversations/{body['id']}/messages",
                                  json={"content": MESSAGES[(index + n) % len(MESSAGES)]}, headers=headers)
            status, data = r.status_code, (r.json() if r.status_code == 200 else {})
        except httpx.HTTPError as e:
            status, data = 0, {"ended_by": f"http error {e!r}"}
        replies.rows.append((body["id"], sent, time.perf_counter(), status, data.get("model_version"),
                             str(data.get("ended_by"))))
        n += 1
        if think_s:  # reading the reply and typing the next message
            await asyncio.sleep(think_s * rng.uniform(0.5, 1.5))
    return body["id"], body["token"]


async def wait_switch(replies: Replies, after: float, version: str, conversations: int, timeout_s: float) -> None:
    """Until every conversation has had a reply by `version` sent after `after` (or the timeout)."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        done = {c for c, _, got, _, v, _ in replies.rows if got > after and v == version}
        if len(done) >= conversations:
            return
        await asyncio.sleep(0.05)


async def switch(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> float:
    r = await client.post(path, json=body, headers=OPS)
    if r.status_code != 200:
        raise RuntimeError(f"{path} answered {r.status_code}: {r.text}")
    return time.perf_counter()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    data = read_tau_retail(Path(args.data_dir or get_settings().benchmarks_dir))
    dbs = TestDatabases()
    procs: list[subprocess.Popen] = []
    work = Path(tempfile.mkdtemp(prefix="promotion_bench_"))
    try:
        t0 = time.perf_counter()
        base_dir, adapter_dir = build_checkpoints(work / "ckpt", view=VIEW)
        build_s = time.perf_counter() - t0
        url = await dbs.create("promotion_bench")
        engine = make_engine(url, null_pool=True)
        async with engine.begin() as conn:
            await load_store(conn, data)
        registry = ModelRegistry(engine)
        base = await registry.register_folder(base_dir, actor="bench", engine="local")
        adapter = await registry.register_folder(adapter_dir, actor="bench", engine="local", base=base.id,
                                                 parent=base.id)
        await engine.dispose()

        engine_port, api_port = free_port(), free_port()
        env = {**os.environ, "PYTHONPATH": str(PROJECT), "DATABASE_URL": url,
               "MUARL_MODEL_SERVER_URL": f"http://127.0.0.1:{engine_port}/v1", "MUARL_OPS_TOKEN": OPS_TOKEN,
               "MUARL_API_RATE_LIMIT_PER_MINUTE": "1000000", "MUARL_AGENT_MAX_STEPS": str(args.max_steps),
               # every simulated customer comes from one address: the per-client quotas would refuse them
               "MUARL_RATE_CONVERSATIONS_PER_HOUR": "0", "MUARL_RATE_MESSAGES_PER_HOUR": "0",
               "MUARL_LLM_MAX_RETRIES": "0", "MUARL_LOG_LEVEL": "WARNING"}
        for key in ("MUARL_LLM_BASE_URL", "MUARL_LLM_MODEL", "MUARL_LLM_API_KEY"):
            env.pop(key, None)
        muarl = str(Path(sys.executable).parent / "muarl")
        procs.append(subprocess.Popen([muarl, "model-server", "--port", str(engine_port), "--max-tokens",
                                       str(args.max_tokens), "--max-batch", str(args.max_batch),
                                       "--model", f"{base.served_name}={base_dir}"],
                                      cwd=PROJECT, env=env))
        procs.append(subprocess.Popen([muarl, "serve", "--port", str(api_port)], cwd=PROJECT, env=env))
        await wait_ready(f"http://127.0.0.1:{engine_port}/health", procs[0], timeout=180)
        await wait_ready(f"http://127.0.0.1:{api_port}/readyz", procs[1], timeout=120)

        limits = httpx.Limits(max_connections=args.conversations + 10, max_keepalive_connections=args.conversations)
        replies = Replies()
        switches: list[dict[str, Any]] = []
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", limits=limits, timeout=120) as client:
            await switch(client, f"/v1/ops/models/{base.id}/promote", {"reason": "bench start", "skip_gates": True})
            customers = [asyncio.create_task(customer(client, replies, i, args.think_ms / 1000))
                         for i in range(args.conversations)]
            await wait_switch(replies, 0.0, base.id, args.conversations, 300)  # every conversation is going
            await asyncio.sleep(args.hold_s)
            for cycle in range(args.cycles):
                for to, path, body in (
                        (adapter, f"/v1/ops/models/{adapter.id}/promote",
                         {"reason": f"bench cycle {cycle}", "skip_gates": True}),
                        (base, "/v1/ops/rollback", {"reason": f"bench cycle {cycle}"})):
                    start = time.perf_counter()
                    returned = await switch(client, path, body)
                    switches.append({"to": to.id, "from": base.id if to is adapter else adapter.id,
                                     "call_s": returned - start, "returned": returned})
                    await wait_switch(replies, returned, to.id, args.conversations, args.switch_timeout_s)
                    await asyncio.sleep(args.hold_s)
            replies.stop = True
            ids = await asyncio.gather(*customers)
            transcripts = await fetch_transcripts(client, ids)
        stats = httpx.get(f"http://127.0.0.1:{engine_port}/stats").json()["models"]
    finally:
        stop_all(procs, wait_s=15)
        await dbs.close()
    return report(args, replies, switches, transcripts, stats, build_s)


async def fetch_transcripts(client: httpx.AsyncClient, ids: list[tuple[str, str]]) -> list[dict[str, Any]]:
    out = []
    for conversation, token in ids:
        r = await client.get(f"/v1/conversations/{conversation}", headers={"Authorization": f"Bearer {token}"})
        r.raise_for_status()
        out.append(r.json())
    return out


def mixed_turns(transcript: dict[str, Any]) -> tuple[int, int]:
    """(turns, turns whose assistant messages came from more than one version)."""
    turns, mixed, versions = 0, 0, set()
    for m in [*transcript.get("messages", []), {"role": "user"}]:
        if m["role"] == "user":
            if versions:
                turns += 1
                mixed += len(versions) > 1
            versions = set()
        elif m["role"] == "assistant" and m.get("model_version"):
            versions.add(m["model_version"])
    return turns, mixed


def report(args: argparse.Namespace, replies: Replies, switches: list[dict[str, Any]],
           transcripts: list[dict[str, Any]], stats: dict[str, Any], build_s: float) -> dict[str, Any]:
    rows = replies.rows
    failed = [r for r in rows if r[3] != 200 or r[5] == "llm_unavailable"]
    latencies, first_any, stale = [], [], 0
    for s in switches:
        per_conversation: dict[str, float] = {}
        for conv, _sent, got, _status, version, _ in rows:
            if got > s["returned"] and version == s["to"] and conv not in per_conversation:
                per_conversation[conv] = got - s["returned"]
        # until the next switch was *called*: a turn sent while it runs may rightly get its version
        ends = [x["returned"] - x["call_s"] for x in switches if x["returned"] > s["returned"]]
        window_end = min(ends) if ends else float("inf")
        stale += sum(1 for _, sent, got, _, version, _ in rows
                     if s["returned"] < sent < window_end and version == s["from"])
        s["conversations_switched"] = len(per_conversation)
        s["p50_s"] = round(percentile(list(per_conversation.values()), 50), 3)
        latencies += list(per_conversation.values())
        if per_conversation:
            first_any.append(min(per_conversation.values()))
    turn_counts = [mixed_turns(t) for t in transcripts]
    turns = [got - sent for _, sent, got, status, _, _ in rows if status == 200]
    out = {
        "conversations": args.conversations, "think_ms": args.think_ms, "switches": len(switches),
        "requests": len(rows),
        "failed_requests": len(failed), "failed_examples": [r[3:] for r in failed[:3]],
        "transcripts_checked": len(transcripts), "turns_in_transcripts": sum(t for t, _ in turn_counts),
        "mixed_turns": sum(m for _, m in turn_counts), "stale_turns": stale,
        "switch_latency_p50_s": round(percentile(latencies, 50), 3),
        "switch_latency_p90_s": round(percentile(latencies, 90), 3),
        "switch_latency_max_s": round(max(latencies), 3) if latencies else None,
        "first_reply_by_new_version_p50_s": round(percentile(first_any, 50), 3),
        "ops_call_p50_s": round(statistics.median(s["call_s"] for s in switches), 3) if switches else None,
        "turn_p50_s": round(percentile(turns, 50), 3), "turn_p90_s": round(percentile(turns, 90), 3),
        "switch_samples": len(latencies), "expected_samples": len(switches) * args.conversations,
        "engine": {name: {k: v for k, v in s.items() if k in ("requests", "batches", "largest_batch")}
                   for name, s in stats.items()},
        "checkpoint_build_s": round(build_s, 1), "cpus": os.cpu_count(),
    }
    out["targets_met"] = (bool(first_any) and out["first_reply_by_new_version_p50_s"] <= 1.0 and not failed
                          and out["mixed_turns"] == 0 and len(latencies) == out["expected_samples"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="promotion and rollback under load (local engine)")
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--cycles", type=int, default=3, help="promote + rollback pairs")
    parser.add_argument("--hold-s", type=float, default=3.0, help="chatting between switches")
    parser.add_argument("--switch-timeout-s", type=float, default=60.0)
    parser.add_argument("--max-steps", type=int, default=3, help="model calls per turn (MUARL_AGENT_MAX_STEPS)")
    parser.add_argument("--max-tokens", type=int, default=32, help="the model server's reply budget")
    parser.add_argument("--max-batch", type=int, default=16, help="the model server's largest batch")
    parser.add_argument("--think-ms", type=float, default=1000.0,
                        help="a customer's pause between a reply and the next message (0: back to back)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = asyncio.run(run(args))
    if args.json:
        print(json.dumps(out))
        return
    print(f"promotion under load: {out['conversations']} concurrent conversations, {out['switches']} switches "
          f"(promote + rollback), local engine, {out['cpus']} CPUs")
    print(f"  ops call returned -> first reply by the new version: p50 {out['first_reply_by_new_version_p50_s']} s "
          f"over {out['switches']} switches (target p50 <= 1 s)")
    print(f"  ... -> each conversation's first reply by it (its pause and the turn it had running included): "
          f"p50 {out['switch_latency_p50_s']} s  p90 {out['switch_latency_p90_s']} s  max "
          f"{out['switch_latency_max_s']} s  ({out['switch_samples']}/{out['expected_samples']} conversations)")
    print(f"  ops call p50 {out['ops_call_p50_s']} s;  turn p50 {out['turn_p50_s']} s  p90 {out['turn_p90_s']} s;  "
          f"think {out['think_ms']} ms")
    print(f"  requests {out['requests']}  failed {out['failed_requests']} (target 0)  mixed turns "
          f"{out['mixed_turns']} of {out['turns_in_transcripts']} (target 0)  stale turns {out['stale_turns']}")
    print(f"  engine: {out['engine']}")
    print(f"  targets met: {out['targets_met']}")
    if out["failed_examples"]:
        print(f"  failed, e.g.: {out['failed_examples']}")


if __name__ == "__main__":
    main()
