"""Apply alembic migrations to a database from inside the application (async-safe)."""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from backend.config import PROJECT_ROOT
from backend.db.engine import make_engine


def alembic_config() -> Config:
    cfg = Config(str(PROJECT_ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(PROJECT_ROOT / "migrations"))
    return cfg


async def upgrade_database(url: str, revision: str = "head") -> None:
    """Upgrade the database at `url` to `revision`."""
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:

            def _upgrade(sync_conn: Connection) -> None:
                cfg = alembic_config()
                cfg.attributes["connection"] = sync_conn
                command.upgrade(cfg, revision)

            await conn.run_sync(_upgrade)
            await conn.commit()
    finally:
        await engine.dispose()


async def current_revision(url: str) -> str | None:
    from sqlalchemy import text

    engine = make_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            exists = await conn.scalar(text("SELECT to_regclass('alembic_version') IS NOT NULL"))
            if not exists:
                return None
            return await conn.scalar(text("SELECT version_num FROM alembic_version"))
    finally:
        await engine.dispose()
