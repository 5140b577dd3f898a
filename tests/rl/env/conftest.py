"""Fixtures for the RL environment tests: the session's frozen snapshot of the tau retail store
(shared with the other rl tests, see tests/rl/conftest.py) and a sandbox pool of their own on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from rl.env import SandboxPool, Snapshot


@pytest.fixture(scope="session")
def tau_snapshot(retail_snapshot: Snapshot) -> Snapshot:
    return retail_snapshot


@pytest.fixture(scope="session")
async def tau_pool(tau_snapshot: Snapshot) -> AsyncIterator[SandboxPool]:
    pool = await SandboxPool(tau_snapshot, size=4).start()
    yield pool
    await pool.close()
