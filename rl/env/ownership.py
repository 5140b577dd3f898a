"""Who owns a scratch database, and the sweep that drops those whose owner process is gone.

Snapshots and sandboxes are whole databases; a process killed with SIGKILL never drops them
(a killed GRPO run left its snapshot and ~80 sandboxes, ~800 MB). So every such database carries
its owner in its name: a token `o<owner:8 hex><random:4 hex>` between underscores, the last one
in the name being the owner (a sandbox's name starts with its snapshot's name, which may carry
the snapshot owner's token). An owner is a process: before naming its first database on a server
it takes a session-level advisory lock `(OWNER_LOCK_CLASS, owner)` on a connection it keeps open
for the rest of its life (a plain psycopg connection, independent of any event loop). PostgreSQL
releases that lock when the process dies, however it dies, so `sweep_orphan_databases` can tell
a live owner from a dead one by looking at `pg_locks`: it drops only databases whose owner holds
no lock, never those of a run still alive.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import uuid
from typing import Any

import structlog
from sqlalchemy import make_url, text

from backend.db.engine import admin_connection, normalize_url

log = structlog.get_logger(__name__)

OWNER_LOCK_CLASS = 0x6D75  # "mu": the first key of every owner's advisory lock
_TOKEN = re.compile(r"(?:^|_)o([0-9a-f]{8})[0-9a-f]{4}(?=_|$)")
_lock = threading.Lock()
_owner: tuple[int, int] | None = None  # (pid, owner) of this process
_held: dict[str, Any] = {}  # server key -> the psycopg connection holding this process's lock
# A forked child (Celery's pool, multiprocessing) inherits its parent's lock connections. It must
# never close them (closing sends the server a goodbye on the shared socket, which would end the
# parent's session and free its lock), so they are kept referenced here and never used.
_inherited: list[Any] = []


def _after_fork_in_child() -> None:
    _inherited.extend(_held.values())
    _held.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _server_key(server_url: str) -> str:
    u = make_url(normalize_url(server_url))
    return f"{u.host}|{u.port}|{u.query.get('host')}|{u.username}"


def _libpq(server_url: str) -> str:
    """A libpq URI of the server's maintenance database."""
    u = make_url(normalize_url(server_url)).set(drivername="postgresql", database="postgres")
    return u.render_as_string(hide_password=False)


def process_owner() -> int:
    """This process's owner number (31 bits; a forked child gets its own)."""
    global _owner
    with _lock:
        if _owner is None or _owner[0] != os.getpid():
            _owner = (os.getpid(), secrets.randbelow(2**31 - 1) + 1)
            _after_fork_in_child()  # connections of another pid are the parent's
        return _owner[1]


def hold_owner_lock(server_url: str) -> int:
    """Take this process's owner lock on the server of `server_url` (once) and return the owner."""
    import psycopg

    owner = process_owner()
    key = _server_key(server_url)
    with _lock:
        if key in _held:
            return owner
        conn = psycopg.connect(_libpq(server_url), autocommit=True, application_name=f"muarl-owner-{owner:08x}")
        conn.execute("SELECT pg_advisory_lock(%s, %s)", (OWNER_LOCK_CLASS, owner))
        _held[key] = conn  # kept open until the process exits: the lock lives as long as the process
    return owner


def owner_token(server_url: str) -> str:
    """A fresh name token owned by this process (`o` + owner + random), holding the owner lock first."""
    owner = hold_owner_lock(server_url)
    return f"o{owner:08x}{uuid.uuid4().hex[:4]}"


def database_owner(name: str) -> int | None:
    """The owner in a database's name (its last owner token), or None for databases nobody owns."""
    found = _TOKEN.findall(name)
    return int(found[-1], 16) if found else None


async def live_owners(conn: Any) -> set[int]:
    rows = await conn.execute(text(
        "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = :c AND objsubid = 2"),
        {"c": OWNER_LOCK_CLASS})
    return {int(r[0]) for r in rows}


async def sweep_orphan_databases(server_url: str, *, prefixes: tuple[str, ...] | None = None) -> list[str]:
    """Drop every owned database on the server whose owner process is gone; returns their names.
    `prefixes` limits the sweep to names starting with one of them."""
    dropped = []
    async with admin_connection(server_url) as admin:
        names = [r[0] for r in await admin.execute(text("SELECT datname FROM pg_database"))]
        owned = {n: o for n in names if (o := database_owner(n)) is not None
                 and (prefixes is None or n.startswith(prefixes))}
        if not owned:
            return []
        alive = await live_owners(admin)
        # templates first would not matter; sandboxes first keeps a half-swept state tidy
        for name in sorted((n for n, o in owned.items() if o not in alive), key=len, reverse=True):
            try:
                await admin.execute(text(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false'))
                await admin.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                dropped.append(name)
            except Exception as e:  # e.g. dropped by another sweep meanwhile
                log.warning("sweep.drop_failed", name=name, error=str(e))
    if dropped:
        log.info("sweep.dropped", count=len(dropped), names=dropped[:10])
    return dropped
