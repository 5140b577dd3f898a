"""Fixtures for the tool tests: `store_conn`, a connection to a copy of the tau retail store
shared by one test module, inside a transaction that is rolled back after each test (tools
run in savepoints inside it), so each test sees the untouched store at a fraction of the
cost of a fresh database copy."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend.db.engine import make_engine
from backend.db.testing import TestDatabases


@pytest.fixture(scope="module")
async def tau_module_engine(test_dbs: TestDatabases, tau_template: str) -> AsyncIterator[AsyncEngine]:
    url = await test_dbs.create("tools", template=tau_template)
    engine = make_engine(url, pool_size=1, max_overflow=0)
    async with engine.connect() as conn:  # planner statistics, as a live store has them
        await conn.execute(text("ANALYZE"))
        await conn.commit()
    yield engine
    await engine.dispose()
    await test_dbs.drop(make_url(url).database)


@pytest.fixture
async def store_conn(tau_module_engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    async with tau_module_engine.connect() as conn:
        await conn.begin()
        try:
            yield conn
        finally:
            await conn.rollback()
