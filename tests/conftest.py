"""Shared fixtures: a real PostgreSQL (embedded unless TEST_DATABASE_URL / DATABASE_URL is set),
throwaway databases, the tau-bench retail data and a loaded store per test."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.config import get_settings
from backend.db.engine import make_engine
from backend.db.testing import TestDatabases
from backend.store.tau_data import StoreData, load_store, read_tau_retail


def benchmarks_dir() -> Path:
    return Path(os.environ.get("MUARL_BENCHMARKS_DIR") or get_settings().benchmarks_dir)


@pytest.fixture(scope="session")
def tau_data_dir() -> Path:
    """The benchmarks folder. Missing data fails loudly under CI and skips elsewhere."""
    d = benchmarks_dir()
    if not (d / "tau1" / "retail" / "users.json").is_file():
        msg = f"tau-bench data not found under {d} (set MUARL_BENCHMARKS_DIR)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return d


@pytest.fixture(scope="session")
def tau_retail(tau_data_dir: Path) -> StoreData:
    return read_tau_retail(tau_data_dir)


@pytest.fixture(scope="session")
async def test_dbs() -> AsyncIterator[TestDatabases]:
    dbs = TestDatabases()
    yield dbs
    await dbs.close()


@pytest.fixture(scope="session")
async def tau_template(test_dbs: TestDatabases, tau_retail: StoreData) -> str:
    """Name of a database holding the tau retail store (used as a template, never written)."""
    url = await test_dbs.create("tau_tpl")
    engine = make_engine(url, null_pool=True)
    async with engine.begin() as conn:
        await load_store(conn, tau_retail)
    async with engine.connect() as conn:  # planner statistics, inherited by every copy
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text("ANALYZE"))
    await engine.dispose()
    return make_url(url).database


@pytest.fixture
async def tau_db(test_dbs: TestDatabases, tau_template: str) -> AsyncIterator[str]:
    """URL of a fresh private copy of the tau retail store."""
    url = await test_dbs.create("tau", template=tau_template)
    yield url
    await test_dbs.drop(make_url(url).database)


@pytest.fixture
async def tau_conn(tau_db: str) -> AsyncIterator[AsyncConnection]:
    engine = make_engine(tau_db, null_pool=True)
    async with engine.connect() as conn:
        yield conn
    await engine.dispose()


@pytest.fixture
async def empty_db(test_dbs: TestDatabases) -> AsyncIterator[str]:
    """URL of a fresh migrated database with an empty store."""
    url = await test_dbs.create("empty")
    yield url
    await test_dbs.drop(make_url(url).database)
