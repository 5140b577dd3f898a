"""`muarl beat` schedules cycles from `MUARL_CYCLE_SCHEDULE`: a real beat process on the embedded
broker sends `muarl.cycle.scheduled` at the configured interval and the periodic sweep, and a
second beat on the same machine refuses to start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import redis

from backend.broker import QUEUE
from backend.config import PROJECT_ROOT
from tests.rl.pipeline.conftest import cycle_env, wait_for


def _tasks(sock: str) -> list[str]:
    r = redis.Redis(unix_socket_path=sock)
    return [json.loads(raw)["headers"]["task"] for raw in r.lrange(QUEUE, 0, -1)]


def test_beat_sends_scheduled_cycles(live_db: str, var_dir: Path, broker: str) -> None:
    env = cycle_env(live_db, var_dir, broker, MUARL_CYCLE_SCHEDULE="2", MUARL_CYCLE_SWEEP_INTERVAL_S="2")
    cmd = [sys.executable, "-m", "backend.cli", "beat", "--loglevel", "WARNING"]
    beat = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    sock = broker.removeprefix("redis+socket://")
    try:
        wait_for(lambda: _tasks(sock).count("muarl.cycle.scheduled") >= 2 and "muarl.cycle.sweep" in _tasks(sock),
                 60, "two scheduled cycles and a sweep")
        second = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode != 0 and "pidfile" in (second.stderr + second.stdout).lower()
        assert beat.poll() is None
    finally:
        os.killpg(beat.pid, signal.SIGTERM)
        beat.wait(timeout=20)
