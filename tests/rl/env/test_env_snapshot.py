"""Snapshots: a frozen template that nobody can connect to, holding the store it was made from."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from backend.db.engine import admin_connection, make_engine
from backend.db.testing import TestDatabases
from backend.store.tau_data import StoreData, export_store, load_store
from rl.env import Snapshot, drop_snapshot, snapshot_from_database
from rl.env.reward import canonical


async def test_snapshot_is_a_template_that_refuses_connections(tau_snapshot: Snapshot) -> None:
    async with admin_connection(tau_snapshot.server_url) as admin:
        row = (await admin.execute(
            text("SELECT datistemplate, datallowconn FROM pg_database WHERE datname = :n"),
            {"n": tau_snapshot.name},
        )).one()
    assert tuple(row) == (True, False)
    engine = make_engine(tau_snapshot.url, null_pool=True)
    try:
        with pytest.raises(Exception, match="not currently accepting connections"):
            async with engine.connect():
                pass
    finally:
        await engine.dispose()


async def test_snapshot_initial_is_the_loaded_store(tau_snapshot: Snapshot, tau_retail: StoreData) -> None:
    assert set(tau_snapshot.initial) == {"users", "orders", "products"}
    for kind in ("users", "orders", "products"):
        assert list(tau_snapshot.initial[kind]) == list(tau_retail[kind])
        assert canonical(tau_snapshot.initial[kind]) == canonical(tau_retail[kind])


async def test_snapshot_from_live_database_reads_only(test_dbs: TestDatabases, tau_retail: StoreData) -> None:
    small = {
        "users": dict(list(tau_retail["users"].items())[:20]),
        "products": tau_retail["products"],
    }
    small["orders"] = {oid: o for oid, o in tau_retail["orders"].items() if o["user_id"] in small["users"]}
    for u in small["users"].values():
        assert all(oid in small["orders"] for oid in u["orders"])
    src = await test_dbs.create("live")
    engine = make_engine(src, null_pool=True)
    async with engine.begin() as conn:
        await load_store(conn, small)
    # the live store refuses writes from here on: a snapshot must not need any
    async with engine.connect() as conn:
        name = (await conn.execute(text("SELECT current_database()"))).scalar_one()
    async with admin_connection(test_dbs.server_url) as admin:
        await admin.execute(text(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on'))
    snap = await snapshot_from_database(test_dbs.server_url, src)
    try:
        assert canonical(snap.initial) == canonical(small)
        async with engine.connect() as conn:
            assert canonical(await export_store(conn)) == canonical(small)
            changes_table = await conn.scalar(text("SELECT to_regclass('muarl_changed_records') IS NULL"))
            assert changes_table  # tracking was installed in the snapshot, not in the live store
    finally:
        await engine.dispose()
        await drop_snapshot(snap)
    async with admin_connection(test_dbs.server_url) as admin:
        gone = await admin.scalar(text("SELECT count(*) FROM pg_database WHERE datname = :n"), {"n": snap.name})
    assert gone == 0
