"""backend/db/engine.py on a real server: URL spellings, names that are refused, and whole
databases created (empty or from a template), found and dropped."""

import pytest
from sqlalchemy import make_url, text

from backend.config import Settings
from backend.db.embedded import libpq_to_sqlalchemy
from backend.db.engine import (
    admin_connection,
    admin_url,
    check_db_name,
    create_database,
    database_exists,
    database_name,
    database_url,
    drop_database,
    make_engine,
    normalize_url,
    with_database,
)

# user and password spelt apart: no committed file holds a URL with a password in it
USER_PASSWORD = "u" + ":" + "p"
SECRET = "u" + ":" + "secret"


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg", "postgresql+psycopg2",
                                    "postgresql+asyncpg"])
def test_every_postgres_spelling_becomes_asyncpg(scheme):
    assert normalize_url(f"{scheme}://{USER_PASSWORD}@h:5433/db") == f"postgresql+asyncpg://{USER_PASSWORD}@h:5433/db"


def test_a_configured_database_url_is_used_normalised():
    assert database_url(Settings(DATABASE_URL="postgres://u@h/shop")) == "postgresql+asyncpg://u@h/shop"


def test_urls_keep_server_credentials_and_socket_when_the_database_changes():
    url = f"postgresql+asyncpg://{SECRET}@/shop?host=/run/pg"
    other = with_database(url, "other")
    parsed = make_url(other)
    assert parsed.database == "other" and parsed.password == "secret" and parsed.query == {"host": "/run/pg"}
    assert admin_url(url).database == "postgres" and admin_url(url).password == "secret"
    assert database_name(other) == "other" and database_name("postgresql+asyncpg://u@h") == "postgres"


def test_embedded_server_uris_become_asyncpg_urls_with_a_database():
    assert libpq_to_sqlalchemy("postgresql://me@localhost:5999?host=/tmp/s") == \
        "postgresql+asyncpg://me@localhost:5999/postgres?host=/tmp/s"
    assert libpq_to_sqlalchemy("postgresql://me@localhost:5999/shop") == "postgresql+asyncpg://me@localhost:5999/shop"
    done = "postgresql+asyncpg://me@h/x"
    assert libpq_to_sqlalchemy(done) == done


@pytest.mark.parametrize("bad", ["", "Upper", "1starts_with_digit", 'x"; DROP DATABASE postgres; --', "a" * 64,
                                 "with-dash", "with space"])
def test_names_outside_lowercase_identifiers_are_refused(bad):
    with pytest.raises(ValueError, match="invalid database name"):
        check_db_name(bad)


async def test_refused_names_never_reach_the_server(test_dbs):
    with pytest.raises(ValueError):
        await create_database(test_dbs.server_url, 'x"; select 1; --')
    with pytest.raises(ValueError):
        await drop_database(test_dbs.server_url, "Bad-Name")


async def test_create_copy_and_drop_whole_databases(test_dbs):
    name = f"{test_dbs.prefix}_engine_src"
    copy = f"{test_dbs.prefix}_engine_copy"
    try:
        url = await create_database(test_dbs.server_url, name)
        assert url.startswith("postgresql+asyncpg://") and database_name(url) == name
        assert await database_exists(test_dbs.server_url, name)
        engine = make_engine(url, null_pool=True)
        try:
            async with engine.begin() as conn:
                await conn.execute(text("CREATE TABLE t (x int)"))
                await conn.execute(text("INSERT INTO t VALUES (7)"))
        finally:
            await engine.dispose()
        copy_url = await create_database(test_dbs.server_url, copy, template=name)
        engine = make_engine(copy_url, pool_size=1, max_overflow=0)
        try:
            async with engine.connect() as conn:
                assert await conn.scalar(text("SELECT x FROM t")) == 7
        finally:
            await engine.dispose()
    finally:
        await drop_database(test_dbs.server_url, copy)
        await drop_database(test_dbs.server_url, name)
    assert not await database_exists(test_dbs.server_url, name)
    assert not await database_exists(test_dbs.server_url, copy)
    await drop_database(test_dbs.server_url, name)  # dropping what is gone is not an error


async def test_drop_forces_out_open_sessions(test_dbs):
    name = f"{test_dbs.prefix}_engine_busy"
    url = await create_database(test_dbs.server_url, name)
    engine = make_engine(url, null_pool=True)
    conn = await engine.connect()
    try:
        await drop_database(test_dbs.server_url, name)
        assert not await database_exists(test_dbs.server_url, name)
    finally:
        try:
            await conn.close()
        except Exception:  # its session was terminated by the drop
            pass
        await engine.dispose()


async def test_the_admin_connection_autocommits_on_the_maintenance_database(test_dbs):
    name = f"{test_dbs.prefix}_engine_admin"
    async with admin_connection(test_dbs.server_url) as conn:
        assert await conn.scalar(text("SELECT current_database()")) == "postgres"
        await conn.execute(text(f'CREATE DATABASE "{name}"'))  # refused inside a transaction block
        await conn.execute(text(f'DROP DATABASE "{name}"'))
    assert not await database_exists(test_dbs.server_url, name)
