"""Store operations on the configured database (DATABASE_URL or embedded), used by the CLI
and `make run`: migrate, load tau data, export, seed."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from backend.db.engine import database_url, make_engine
from backend.db.migrate import upgrade_database
from backend.store.tau_data import (
    StoreData,
    clear_store,
    export_store,
    load_store,
    read_tau_retail,
    store_is_empty,
)


async def load_data_into_store(data: StoreData, *, replace: bool = False, url: str | None = None) -> dict[str, int]:
    """Migrate the store and load `data` in one transaction (refuses a non-empty store unless `replace`)."""
    url = url or database_url()
    await upgrade_database(url)
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.begin() as conn:
            if not await store_is_empty(conn):
                if not replace:
                    raise ValueError("the store is not empty: pass --replace to replace it")
                await clear_store(conn)
            counts = await load_store(conn, data)
        async with engine.connect() as conn:  # fresh planner statistics for the new store
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text("ANALYZE"))
        return counts
    finally:
        await engine.dispose()


async def load_tau_into_store(data_dir: Path, *, replace: bool = False, url: str | None = None) -> dict[str, int]:
    return await load_data_into_store(read_tau_retail(Path(data_dir)), replace=replace, url=url)


async def export_current_store(url: str | None = None) -> StoreData:
    url = url or database_url()
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return await export_store(conn)
    finally:
        await engine.dispose()
