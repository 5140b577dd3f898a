"""One connection budget for sandboxes: a single pool and the experiment's side-by-side workers
divide the server's connections by the same rule, and together stay within them."""

import contextlib

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from backend.db.engine import admin_connection
from rl.env import SandboxPool, Snapshot
from rl.env.sandbox import OTHER_CLIENTS, sandbox_budget, sandbox_share


def test_the_budget_leaves_room_for_admin_connections_and_other_clients():
    assert sandbox_budget(85) == 82  # one pool: 2 refill workers + 1 admin connection
    assert sandbox_budget(85, pools=2) == 39
    assert sandbox_budget(85, workers=4) == 80
    assert sandbox_budget(3) == 1 and sandbox_budget(0, pools=5) == 1  # never nothing


async def test_pools_side_by_side_stay_within_the_servers_connections(test_dbs):
    async with admin_connection(test_dbs.server_url) as admin:
        limit = int(await admin.scalar(text("SHOW max_connections")))
        reserved = int(await admin.scalar(text("SHOW superuser_reserved_connections")))
    for pools in (1, 2, 3):
        share = await sandbox_share(test_dbs.server_url, pools)
        assert share >= 1 and pools * (share + 3) + OTHER_CLIENTS <= limit - reserved
    assert await sandbox_share(test_dbs.server_url, 1) <= limit - reserved - OTHER_CLIENTS - 3


async def test_connections_other_sessions_hold_are_not_shared_out(test_dbs):
    before = await sandbox_share(test_dbs.server_url, 1)
    engine = create_async_engine(test_dbs.server_url, pool_size=10, max_overflow=0)
    try:
        async with contextlib.AsyncExitStack() as held:
            for _ in range(10):
                conn = await held.enter_async_context(engine.connect())
                await conn.execute(text("SELECT 1"))
            during = await sandbox_share(test_dbs.server_url, 1)
    finally:
        await engine.dispose()
    # the server is shared: other sessions may come and go meanwhile, hence the tolerance
    assert 8 <= before - during <= 12


async def test_a_pool_without_a_cap_takes_the_single_pool_share(tau_snapshot: Snapshot, test_dbs):
    async with SandboxPool(tau_snapshot, size=0) as pool:
        share = await sandbox_share(test_dbs.server_url, 1)
        # the pool's own admin connections count as in use when the test asks afterwards
        assert share - 3 <= pool.max_sandboxes <= share + 3
