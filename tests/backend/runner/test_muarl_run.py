"""`muarl run` as a user runs it, on a fresh var dir with no configuration: it starts the
embedded Postgres and Redis, the API, a Celery worker and beat and the local model server,
Ctrl-C (SIGINT) or SIGTERM stops every process it started (the worker's pool and the embedded
Postgres included), and a second run resumes on the same data."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from backend.config import get_settings

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(var_dir: Path, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MUARL_") and k not in ("DATABASE_URL", "REDIS_URL", "TEST_DATABASE_URL")}
    # every service; an external model is configured so that no first cycle starts training here
    env |= {"MUARL_VAR_DIR": str(var_dir), "PYTHONPATH": str(ROOT), "MUARL_LLM_BASE_URL": "http://127.0.0.1:9/v1",
            "MUARL_LLM_MODEL": "external-test-model"}
    if os.environ.get("MUARL_BENCHMARKS_DIR"):
        env["MUARL_BENCHMARKS_DIR"] = os.environ["MUARL_BENCHMARKS_DIR"]
    return subprocess.Popen([sys.executable, "-m", "backend.cli", "run", "--port", str(port)], cwd=var_dir.parent,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_healthy(proc: subprocess.Popen[str], port: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError("muarl run did not become healthy")


def _started_processes(proc: subprocess.Popen[str], var_dir: Path, timeout: float = 120.0) -> list[psutil.Process]:
    """Everything `muarl run` started, once its tree stops growing: redis, api, worker (with its
    pool process), beat, model-server, and the embedded Postgres (a daemon, found by its pid file)."""
    deadline = time.monotonic() + timeout
    seen: list[int] = []
    while time.monotonic() < deadline:
        proc_children = psutil.Process(proc.pid).children(recursive=True)
        pids = sorted(p.pid for p in proc_children)
        if len(pids) >= 6 and pids == seen:
            break
        seen = pids
        time.sleep(2.0)
    pid_file = var_dir / "pgdata" / "postmaster.pid"
    postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
    # short-lived processes (a Postgres backend of a closed connection, a helper a service ran) may
    # end between listing and reading them: what ended by itself is not left running
    procs = _still_running([*proc_children, postmaster, *postmaster.children(recursive=True)])
    names = {p.name() for p in procs}
    assert "postgres" in names and any("redis" in n for n in names), names
    commands = " ".join(" ".join(p.cmdline()) for p in _still_running(proc_children)
                        if p.status() != psutil.STATUS_ZOMBIE)
    for service in ("serve", "worker", "beat", "model-server"):
        assert f"backend.cli {service}" in commands, f"{service} is not running: {commands}"
    return procs


def _still_running(procs: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for p in procs:
        try:
            p.name(), p.cmdline()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        alive.append(p)
    return alive


def _output_of_failed(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=90)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[0]


def _stop(proc: subprocess.Popen[str], sig: signal.Signals, procs: list[psutil.Process]) -> str:
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, out
    _, alive = psutil.wait_procs(procs, timeout=15)
    alive = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert alive == [], f"left running: {alive}\n{out}"
    return out


@pytest.fixture
def var_dir() -> Iterator[Path]:
    """A fresh var dir under the project's var/ (pytest's shared temp root can be pruned by a
    concurrent session while the embedded Postgres still runs there)."""
    path = Path(get_settings().var_dir).resolve() / "test" / f"run-{uuid.uuid4().hex[:8]}" / "var"
    path.parent.mkdir(parents=True)
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


def test_run_stops_everything_it_started_and_resumes(var_dir: Path) -> None:
    port = _free_port()
    first = _start(var_dir, port)
    try:
        _wait_healthy(first, port)
        started = httpx.post(f"http://127.0.0.1:{port}/v1/conversations", timeout=10).json()
        try:
            procs = _started_processes(first, var_dir)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{_output_of_failed(first)}") from None
        out = _stop(first, signal.SIGINT, procs)
    finally:
        if first.poll() is None:
            first.kill()
    assert not (var_dir / "pgdata" / "postmaster.pid").exists()
    assert "store    loaded" in out and "starting redis, api, worker, beat, model-server (" in out
    assert "worker       | " in out and "Failed to stop" not in out, out
    # no debugging noise: the embedded Postgres wheel's internal commands stay hidden
    assert not re.search(r"Running commandline|initdb|pg_ctl|RuntimeDirWarning|Running upgrade", out), out
    # nor Celery's banners and its superuser warning (MUARL_LOG_LEVEL=debug shows them)
    assert not re.search(r"SecurityWarning|\.> transport:|\[tasks\]|celery beat v|Configuration ->", out), out

    second = _start(var_dir, port)
    try:
        _wait_healthy(second, port)
        auth = {"Authorization": f"Bearer {started['token']}"}
        again = httpx.get(f"http://127.0.0.1:{port}/v1/conversations/{started['id']}", headers=auth, timeout=10)
        assert again.status_code == 200, again.text
        procs = _started_processes(second, var_dir)
        out = _stop(second, signal.SIGTERM, procs)
    finally:
        if second.poll() is None:
            second.kill()
    assert "store    already has data" in out
