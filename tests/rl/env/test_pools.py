"""Snapshot and pool set-up shared by the harness, gold verification and the experiment
(rl/env/pools.py): the caller's snapshots are used and kept, the ones it makes are dropped, pools
start on first use and can be released and started again."""

from sqlalchemy import text

from backend.db.engine import admin_connection
from rl.env import Snapshot
from rl.env.pools import StorePools


async def _databases(server_url: str) -> set[str]:
    async with admin_connection(server_url) as admin:
        return set((await admin.execute(text("SELECT datname FROM pg_database"))).scalars())


async def test_a_given_snapshot_is_used_and_outlives_the_pools(tau_snapshot: Snapshot, test_dbs):
    async with StorePools(test_dbs.server_url, size=1, snapshots={"tau-retail": tau_snapshot}) as stores:
        assert await stores.snapshot("tau-retail") is tau_snapshot
        pool = await stores.pool("tau-retail")
        assert await stores.pool("tau-retail") is pool and pool.snapshot is tau_snapshot
        async with pool.sandbox() as sb:
            assert await sb.is_pristine()
    assert pool.connections == 0
    assert tau_snapshot.name in await _databases(test_dbs.server_url)


async def test_a_made_snapshot_is_dropped_and_a_released_pool_restarts(test_dbs):
    stores = StorePools(test_dbs.server_url, size=1, name_prefix="pools_test_")
    try:
        snap = await stores.snapshot("synthetic:3:12")
        assert snap.name.startswith("pools_test_") and snap.initial["users"]
        first = await stores.pool("synthetic:3:12")
        await stores.release()
        assert first.connections == 0
        second = await stores.pool("synthetic:3:12")
        assert second is not first and second.snapshot is snap
    finally:
        await stores.close()
    left = await _databases(test_dbs.server_url)
    assert snap.name not in left and not any(d.startswith(second.name_prefix) for d in left)


async def test_preloaded_data_is_used_for_its_reference(retail_snapshot: Snapshot, test_dbs):
    data = {"mine": retail_snapshot.initial}
    async with StorePools(test_dbs.server_url, size=0, data=data) as stores:
        snap = await stores.snapshot("mine")
        assert snap is not retail_snapshot and snap.initial.keys() == retail_snapshot.initial.keys()
    assert snap.name not in await _databases(test_dbs.server_url)
