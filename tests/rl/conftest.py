"""Fixtures for episode-level tests (tasks, simulators, policies, evaluation): one frozen snapshot
of the tau retail store per session, a sandbox pool on it, and generated tasks covering every
category. (tests/rl/env has its own `tau_snapshot`; these names do not clash with it.)"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from backend.db.testing import TestDatabases
from backend.store.tau_data import StoreData
from rl.env import SandboxPool, Snapshot, create_snapshot, drop_snapshot
from rl.tasks.generator import SCHEDULE, generate_tasks
from rl.tasks.schema import Task


@pytest.fixture(scope="session")
async def retail_snapshot(test_dbs: TestDatabases, tau_retail: StoreData) -> AsyncIterator[Snapshot]:
    snap = await create_snapshot(test_dbs.server_url, tau_retail, name=f"{test_dbs.prefix}_retail")
    yield snap
    await drop_snapshot(snap)


@pytest.fixture(scope="session")
async def retail_pool(retail_snapshot: Snapshot) -> AsyncIterator[SandboxPool]:
    pool = await SandboxPool(retail_snapshot, size=4).start()
    yield pool
    await pool.close()


@pytest.fixture(scope="session")
def generated_tasks(tau_retail: StoreData) -> list[Task]:
    """Two tasks of every generator category on the tau retail store."""
    return generate_tasks(tau_retail, 2 * len(SCHEDULE), seed=7, snapshot="tau-retail")
