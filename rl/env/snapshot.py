"""Snapshots: frozen template databases of a store, from which sandboxes are copied.

`create_snapshot` builds a new database on a server (a copy of the schema template, loaded
with a store in tau-bench's JSON shape, change tracking installed, vacuumed and frozen so
copies start with hint bits and statistics), then marks it a template that accepts no
connections: nothing can ever write to it again, and `CREATE DATABASE .. TEMPLATE` may copy it
at any time. `snapshot_from_database` takes a snapshot of a live store: in one read-only
repeatable-read transaction it streams every store table with `COPY` into the new database and
exports the records once (the snapshot's `initial`); the live store is never written. The
live store itself cannot be a template (PostgreSQL copies a database only while nobody is
connected to it, and customers are).

The schema template (`muarl_schema_<head revision>_<digest of the migrations>`) is a migrated,
empty database made once per server and schema, so a snapshot costs a template copy instead of
running every migration (~1 s). It is built under an owned name and renamed when complete, so a
process killed while building it leaves only an orphan the sweep drops.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy import text

from backend.db.engine import admin_connection, check_db_name, create_database, make_engine, with_database
from backend.db.migrate import alembic_config, upgrade_database
from backend.store.checksum import STORE_TABLES
from backend.store.tau_data import StoreData, export_store, load_store
from rl.env.changes import CHANGES_TABLE, install_change_tracking
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


def schema_template_name() -> str:
    """The schema template's name for the migrations of this checkout."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    digest = hashlib.sha256()
    for path in sorted(Path(script.versions).glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    head = str(script.get_current_head())
    return check_db_name(f"muarl_schema_{head[:16]}_{digest.hexdigest()[:10]}")


async def schema_template(server_url: str) -> str:
    """The migrated empty template on the server (made on first use); returns its name."""
    name = schema_template_name()
    async with admin_connection(server_url) as admin:
        if await admin.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}):
            return name
    building = check_db_name(f"muarl_schema_{owner_token(server_url)}")
    url = await create_database(server_url, building)
    try:
        await upgrade_database(url)
        engine = make_engine(url, null_pool=True)
        try:
            async with engine.connect() as conn:
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await conn.execute(text("VACUUM (FREEZE, ANALYZE)"))
        finally:
            await engine.dispose()
        async with admin_connection(server_url) as admin:
            await admin.execute(text(f'ALTER DATABASE "{building}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false'))
            try:
                await admin.execute(text(f'ALTER DATABASE "{building}" RENAME TO "{name}"'))
            except Exception:  # another process finished its own first: use that one
                if not await admin.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}):
                    raise
    finally:
        await _drop(server_url, building)
    log.info("snapshot.schema_template", name=name)
    return name


async def _new_store_database(server_url: str, name: str) -> str:
    return await create_database(server_url, name, template=await schema_template(server_url))


async def _freeze(server_url: str, url: str, name: str) -> None:
    """Change tracking on, vacuumed and frozen, then a template nobody can connect to."""
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await install_change_tracking(conn)
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            # the catalogs were frozen in the schema template: only the store's tables need it
            await conn.execute(text(f"VACUUM (FREEZE, ANALYZE) {', '.join(STORE_TABLES)}, {CHANGES_TABLE}"))
    finally:
        await engine.dispose()
    async with admin_connection(server_url) as admin:
        await admin.execute(text(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false'))


async def create_snapshot(server_url: str, data: StoreData, name: str | None = None) -> Snapshot:
    """A new frozen snapshot of `data` on the server of `server_url`."""
    name = check_db_name(name or new_snapshot_name(server_url))
    try:
        url = await _new_store_database(server_url, name)
        engine = make_engine(url, null_pool=True)
        try:
            async with engine.begin() as conn:
                await load_store(conn, data)
            async with engine.connect() as conn:
                initial = await export_store(conn)
                await conn.rollback()
        finally:
            await engine.dispose()
        await _freeze(server_url, url, name)
    except BaseException:
        await _drop(server_url, name)
        raise
    log.info("snapshot.created", name=name, users=len(initial["users"]), orders=len(initial["orders"]))
    return Snapshot(name=name, server_url=server_url, initial=initial)


async def snapshot_from_database(server_url: str, source_url: str, name: str | None = None) -> Snapshot:
    """Snapshot the store at `source_url` (read only) into a new template on `server_url`. The
    live store's records are exported while the new database is being copied from the schema
    template; then its tables are streamed with `COPY` in the same transaction."""
    import asyncio

    from backend.db.models import Base

    name = check_db_name(name or new_snapshot_name(server_url))
    source = make_engine(source_url, null_pool=True)
    try:
        async with source.connect() as conn:
            conn = await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin() as tx:
                await conn.execute(text("SET TRANSACTION READ ONLY"))
                await conn.execute(text("SELECT 1"))  # the transaction's view of the store is fixed here
                making = asyncio.create_task(_new_store_database(server_url, name))
                try:
                    initial = await export_store(conn)
                finally:
                    url = await making
                reader = (await conn.get_raw_connection()).driver_connection
                target = make_engine(url, null_pool=True)
                try:
                    async with target.connect() as dest:
                        writer = (await dest.get_raw_connection()).driver_connection
                        async with writer.transaction():
                            for table in STORE_TABLES:  # parents before children (foreign keys)
                                columns = [c.name for c in Base.metadata.tables[table].columns]
                                buf = io.BytesIO()
                                cols = ", ".join(f'"{c}"' for c in columns)
                                await reader.copy_from_query(f'SELECT {cols} FROM "{table}"', output=buf,
                                                             format="binary")
                                buf.seek(0)
                                await writer.copy_to_table(table, source=buf, columns=columns, format="binary")
                finally:
                    await target.dispose()
                await tx.rollback()
        await _freeze(server_url, url, name)
    except BaseException:
        await _drop(server_url, name)
        raise
    finally:
        await source.dispose()
    log.info("snapshot.created", name=name, users=len(initial["users"]), orders=len(initial["orders"]),
             source="live")
    return Snapshot(name=name, server_url=server_url, initial=initial)


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
