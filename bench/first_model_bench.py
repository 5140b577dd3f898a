"""Benchmark: time from `muarl run` on a fresh machine to the first answer from a champion.

Starts `muarl run` (all services: embedded Postgres and Redis, API, Celery worker and beat, the
local model server) on a fresh var dir with no configuration, so the first cycle starts at once
with the `first-model` recipe. Polls chat every few seconds: while no model can answer it gets
503s that carry the cycle's progress (printed whenever the step changes), and it stops at the
first 200 reply whose `model` names the promoted version. Prints the time to the API answering,
to the first served model, and the cycle's result; then stops `muarl run` with SIGINT (as Ctrl-C
does) and checks that every process it started is gone. Target (issue 21): <= 15 min on 2 cores.

    .venv/bin/python bench/first_model_bench.py [--var-dir DIR] [--timeout-min 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

PROJECT = Path(__file__).resolve().parent.parent
TARGET_S = 15 * 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(var_dir: Path, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MUARL_") and k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"MUARL_VAR_DIR": str(var_dir), "PYTHONPATH": str(PROJECT), "MUARL_OPS_TOKEN": "bench-ops",
            # the probe opens a conversation every poll, from one address: per-client quotas would refuse it
            "MUARL_RATE_CONVERSATIONS_PER_HOUR": "0", "MUARL_RATE_MESSAGES_PER_HOUR": "0"}
    if os.environ.get("MUARL_BENCHMARKS_DIR"):
        env["MUARL_BENCHMARKS_DIR"] = os.environ["MUARL_BENCHMARKS_DIR"]
    log = log_path.open("wb")
    return subprocess.Popen([sys.executable, "-m", "backend.cli", "run", "--port", str(port),
                             "--model-server-port", str(_free_port())],
                            cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT)


def _chat_once(client: httpx.Client) -> tuple[int, dict[str, Any]]:
    started = client.post("/v1/conversations")
    if started.status_code != 201:
        return started.status_code, {}
    conv = started.json()
    r = client.post(f"/v1/conversations/{conv['id']}/messages", json={"content": "Hi, where is my order?"},
                    headers={"Authorization": f"Bearer {conv['token']}"})
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--var-dir", type=Path, help="where `muarl run` keeps its data (default: a fresh temp dir)")
    ap.add_argument("--timeout-min", type=float, default=30.0)
    ap.add_argument("--poll-s", type=float, default=5.0)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    var_dir = (args.var_dir or Path(tempfile.mkdtemp(prefix="muarl-first-model-"))).resolve()
    port = _free_port()
    var_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = var_dir.parent / f"{var_dir.name}.run.log"
    t0 = time.monotonic()
    proc = _start(var_dir, port, log_path)
    result: dict[str, Any] = {"var_dir": str(var_dir), "log": str(log_path), "target_s": TARGET_S}
    last_step = None
    say = (lambda *_: None) if args.json else (lambda m: print(f"[{time.monotonic() - t0:7.1f} s] {m}", flush=True))
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            while time.monotonic() - t0 < args.timeout_min * 60:
                if proc.poll() is not None:
                    raise SystemExit(f"muarl run exited with {proc.returncode}; see {log_path}")
                try:
                    status, body = _chat_once(client)
                except httpx.HTTPError:
                    time.sleep(1.0)
                    continue
                if "api_up_s" not in result:
                    result["api_up_s"] = round(time.monotonic() - t0, 1)
                    say(f"API answers (chat {status})")
                if status == 200 and body.get("model"):
                    result["first_model_s"] = round(time.monotonic() - t0, 1)
                    result["model"] = body["model"]
                    say(f"first reply from {body['model']}: {body.get('reply', '')[:80]!r}")
                    break
                cycle = body.get("cycle") or {}
                if cycle:
                    result["last_progress"] = {k: cycle.get(k) for k in ("cycle_id", "status", "step", "percent")}
                step = (cycle.get("cycle_id"), cycle.get("status"), cycle.get("step"))
                if step != last_step:
                    say(f"chat {status}: {body.get('detail', '')[-160:]}")
                    last_step = step
                if cycle.get("status") == "failed":
                    result["error"] = cycle.get("error")
                    break
                if cycle.get("status") == "succeeded" and cycle.get("gate_passed") is False:
                    result["error"] = f"the candidate ({cycle.get('candidate')}) did not pass its gate"
                    result["interrupted_after_s"] = round(time.monotonic() - t0, 1)
                    break
                time.sleep(args.poll_s)
            cycles = client.get("/v1/ops/cycles", headers={"Authorization": "Bearer bench-ops"})
            if cycles.status_code == 200:
                result["cycles"] = cycles.json()
    except KeyboardInterrupt:  # report what was reached
        result["interrupted_after_s"] = round(time.monotonic() - t0, 1)
    finally:
        procs = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        _, alive = psutil.wait_procs(procs, timeout=15)
        result["left_running_after_ctrl_c"] = [p.pid for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    first = result.get("first_model_s")
    result["within_target"] = first is not None and first <= TARGET_S
    if args.json:
        print(json.dumps(result, default=str))
        return
    print(f"API up after          {result.get('api_up_s')} s")
    verdict = "met" if result["within_target"] else "NOT met"
    print(f"first served model    {first} s  (target <= {TARGET_S} s: {verdict})")
    if result.get("error"):
        print(f"cycle failed          {result['error']}")
    if first is None:
        print(f"stopped at            {result.get('last_progress')} after "
              f"{result.get('interrupted_after_s') or args.timeout_min * 60} s")
    print(f"left running          {result['left_running_after_ctrl_c'] or 'nothing'}")
    print(f"log                   {log_path}")


if __name__ == "__main__":
    main()
