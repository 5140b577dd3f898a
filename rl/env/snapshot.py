"""Snapshots: frozen template databases of a store, from which sandboxes are copied.

`create_snapshot` builds a new database on a server (migrated, loaded with a store in
tau-bench's JSON shape, change tracking installed, vacuumed and frozen so copies start with
hint bits and statistics), then marks it a template that accepts no connections: nothing can
ever write to it again, and `CREATE DATABASE .. TEMPLATE` may copy it at any time.
`snapshot_from_database` takes a snapshot of a live store by exporting it in one read-only
repeatable-read transaction; the live store is never written. The snapshot keeps the store's
initial records in memory (plain numbers) for diffs and rewards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy import text

from backend.db.engine import admin_connection, check_db_name, create_database, make_engine, with_database
from backend.db.migrate import upgrade_database
from backend.store.tau_data import StoreData, export_store, load_store
from rl.env.changes import install_change_tracking
from rl.env.ownership import owner_token

log = structlog.get_logger(__name__)

SNAPSHOT_PREFIX = "muarl_snap_"


@dataclass(frozen=True, eq=False)
class Snapshot:
    """A template database of a store. `initial` is that store in tau JSON shape (plain numbers)."""

    name: str
    server_url: str
    initial: StoreData = field(repr=False)

    @property
    def url(self) -> str:
        """URL of the template database (it refuses connections; for naming only)."""
        return with_database(self.server_url, self.name)

    def initial_record(self, kind: str, key: str) -> Any:
        return self.initial[kind].get(key)


def new_snapshot_name(server_url: str) -> str:
    """A fresh snapshot name owned by this process (rl/env/ownership.py: the sweep drops it if the
    process dies without dropping it)."""
    return f"{SNAPSHOT_PREFIX}{owner_token(server_url)}"


async def create_snapshot(server_url: str, data: StoreData, name: str | None = None) -> Snapshot:
    """A new frozen snapshot of `data` on the server of `server_url`."""
    name = check_db_name(name or new_snapshot_name(server_url))
    url = await create_database(server_url, name)
    try:
        await upgrade_database(url)
        engine = make_engine(url, null_pool=True)
        try:
            async with engine.begin() as conn:
                await load_store(conn, data)
                await install_change_tracking(conn)
            async with engine.connect() as conn:
                initial = await export_store(conn)
                await conn.rollback()
            async with engine.connect() as conn:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await conn.execute(text("VACUUM (FREEZE, ANALYZE)"))
        finally:
            await engine.dispose()
        async with admin_connection(server_url) as admin:
            await admin.execute(text(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false'))
    except BaseException:
        await _drop(server_url, name)
        raise
    log.info("snapshot.created", name=name, users=len(initial["users"]), orders=len(initial["orders"]))
    return Snapshot(name=name, server_url=server_url, initial=initial)


async def snapshot_from_database(server_url: str, source_url: str, name: str | None = None, *,
                                 prepare: Callable[[StoreData], Awaitable[StoreData]] | None = None) -> Snapshot:
    """Snapshot the store at `source_url` (read only) into a new template on `server_url`;
    `prepare` may change the records first (e.g. put escalated customers' records back as they were)."""
    engine = make_engine(source_url, null_pool=True)
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin() as tx:
                await conn.execute(text("SET TRANSACTION READ ONLY"))
                data = await export_store(conn)
                await tx.rollback()
    finally:
        await engine.dispose()
    if prepare is not None:
        data = await prepare(data)
    return await create_snapshot(server_url, data, name)


async def drop_snapshot(snapshot: Snapshot) -> None:
    """Drop the snapshot's template database (sandboxes copied from it are unaffected)."""
    await _drop(snapshot.server_url, snapshot.name)
    log.info("snapshot.dropped", name=snapshot.name)


async def _drop(server_url: str, name: str) -> None:
    async with admin_connection(server_url) as admin:
        exists = await admin.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
        if exists:
            await admin.execute(text(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false'))
            await admin.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
