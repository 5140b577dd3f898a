"""Database URLs, async engines and connections.

`database_url()` resolves where the store lives: `DATABASE_URL` when set (any
`postgres://` / `postgresql://` spelling is normalised to asyncpg), otherwise an embedded
PostgreSQL under `var/`. Helpers here also create and drop whole databases, which the
sandbox pool and the tests use.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import make_url, text
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from backend.config import Settings, get_settings

_DB_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def normalize_url(url: str) -> str:
    """Return `url` as a SQLAlchemy asyncpg URL string."""
    for prefix in ("postgres://", "postgresql://", "postgresql+psycopg://", "postgresql+psycopg2://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix):]
    return url


def database_url(settings: Settings | None = None) -> str:
    """The store's URL: `DATABASE_URL`, or an embedded server started on demand."""
    settings = settings or get_settings()
    if settings.database_url:
        return normalize_url(settings.database_url)
    from backend.db.embedded import start_embedded_postgres

    return start_embedded_postgres(settings.var_dir)


def with_database(url: str, name: str) -> str:
    """The same server as `url`, database `name`."""
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def database_name(url: str) -> str:
    name = make_url(url).database
    return name or "postgres"


def check_db_name(name: str) -> str:
    if not _DB_NAME.match(name):
        raise ValueError(f"invalid database name {name!r}")
    return name


def make_engine(url: str, *, pool_size: int = 5, max_overflow: int = 10, null_pool: bool = False) -> AsyncEngine:
    """An async engine on `url` (asyncpg)."""
    url = normalize_url(url)
    if null_pool:
        return create_async_engine(url, poolclass=NullPool)
    return create_async_engine(url, pool_size=pool_size, max_overflow=max_overflow, pool_pre_ping=False)


def admin_url(url: str) -> URL:
    """URL of the maintenance database on the same server (for CREATE/DROP DATABASE)."""
    return make_url(normalize_url(url)).set(database="postgres")


@asynccontextmanager
async def admin_connection(url: str) -> AsyncIterator[AsyncConnection]:
    """An autocommit connection to the server's `postgres` database."""
    engine = create_async_engine(admin_url(url), poolclass=NullPool, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            yield conn
    finally:
        await engine.dispose()


async def create_database(url: str, name: str, *, template: str | None = None) -> str:
    """Create database `name` on the server of `url`; returns the new database's URL."""
    check_db_name(name)
    async with admin_connection(url) as conn:
        sql = f'CREATE DATABASE "{name}"'
        if template:
            sql += f' TEMPLATE "{check_db_name(template)}"'
        await conn.execute(text(sql))
    return with_database(normalize_url(url), name)


async def drop_database(url: str, name: str) -> None:
    """Drop database `name` (forcing out other sessions) if it exists."""
    check_db_name(name)
    async with admin_connection(url) as conn:
        await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def database_exists(url: str, name: str) -> bool:
    async with admin_connection(url) as conn:
        row = await conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
        return row.first() is not None
