"""`muarl cycle run / status` from outside: bad input exits 2 with a clear message and writes
nothing; a second cycle while one is active exits 1 naming it; without --wait the last line is
the JSON object of the queued cycle, and its start task is on the broker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import redis

from backend.broker import QUEUE
from backend.config import PROJECT_ROOT
from tests.rl.pipeline.conftest import cycle_env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=180)


def test_cycle_run_and_status(live_db: str, var_dir: Path, broker: str) -> None:
    env = cycle_env(live_db, var_dir, broker)
    bad = _cli(env, "cycle", "run", "--recipe", "nope")
    assert bad.returncode == 2 and "unknown recipe 'nope'" in bad.stderr

    queued = _cli(env, "cycle", "run", "--recipe", "smoke")
    assert queued.returncode == 0, queued.stderr
    line = json.loads(queued.stdout.strip().splitlines()[-1])
    assert line["status"] == "queued" and line["candidate"] is None and line["gate_passed"] is None
    assert line["promoted"] is False
    sent = [json.loads(m)["headers"]["task"] for m in
            redis.Redis(unix_socket_path=broker.removeprefix("redis+socket://")).lrange(QUEUE, 0, -1)]
    assert sent == ["muarl.cycle.start"]

    busy = _cli(env, "cycle", "run", "--recipe", "smoke")
    assert busy.returncode == 1 and line["cycle_id"] in busy.stderr
    status = json.loads(_cli(env, "cycle", "status", "--json").stdout)
    assert status["active"]["cycle_id"] == line["cycle_id"] and status["cycles"][0]["status"] == "queued"
