"""Fixtures for the RL environment tests: a frozen snapshot of the tau retail store (one per
session) and a sandbox pool on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from backend.db.testing import TestDatabases
from backend.store.tau_data import StoreData
from rl.env import SandboxPool, Snapshot, create_snapshot, drop_snapshot


@pytest.fixture(scope="session")
async def tau_snapshot(test_dbs: TestDatabases, tau_retail: StoreData) -> AsyncIterator[Snapshot]:
    snap = await create_snapshot(test_dbs.server_url, tau_retail, name=f"{test_dbs.prefix}_snap")
    yield snap
    await drop_snapshot(snap)


@pytest.fixture(scope="session")
async def tau_pool(tau_snapshot: Snapshot) -> AsyncIterator[SandboxPool]:
    pool = await SandboxPool(tau_snapshot, size=4).start()
    yield pool
    await pool.close()
