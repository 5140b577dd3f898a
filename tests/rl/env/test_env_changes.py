"""Change tracking: the touched records of a sandbox, read back and compared with the snapshot."""

from __future__ import annotations

import random

from sqlalchemy import text

from backend.store.tau_data import export_store
from rl.env import SandboxPool, Snapshot, diff_stores
from rl.env.changes import touched_keys


def _pending_order(snap: Snapshot, n: int = 0) -> tuple[str, dict]:
    pending = [(oid, o) for oid, o in snap.initial["orders"].items() if o["status"] == "pending"]
    return pending[n]


async def test_no_changes_in_a_fresh_sandbox(tau_pool: SandboxPool) -> None:
    async with tau_pool.sandbox() as sb:
        assert await sb.changed_records() == {"users": {}, "orders": {}, "products": {}}
        assert await touched_keys(sb.conn) == {"users": [], "orders": [], "products": []}
        await sb.conn.rollback()


async def test_each_table_maps_to_its_record(tau_pool: SandboxPool, tau_snapshot: Snapshot) -> None:
    oid, order = _pending_order(tau_snapshot)
    uid = order["user_id"]
    user = tau_snapshot.initial["users"][uid]
    gift = next((pm for pm in user["payment_methods"].values() if pm["source"] == "gift_card"), None)
    pid, product = next(iter(tau_snapshot.initial["products"].items()))
    vid = next(iter(product["variants"]))
    async with tau_pool.sandbox() as sb:
        async with sb.conn.begin():
            await sb.conn.execute(text("UPDATE orders SET status = 'cancelled' WHERE id = :id"), {"id": oid})
            await sb.conn.execute(text(
                "INSERT INTO payment_transactions (order_id, seq, transaction_type, amount, payment_method_id) "
                "VALUES (:id, 99, 'refund', 1.5, 'x')"), {"id": oid})
            await sb.conn.execute(text("UPDATE variants SET available = NOT available WHERE item_id = :v"),
                                  {"v": vid})
            if gift:
                await sb.conn.execute(text("UPDATE payment_methods SET balance = balance + 1 WHERE id = :id"),
                                      {"id": gift["id"]})
        changes = await sb.changed_records()
        touched = await touched_keys(sb.conn)
        await sb.conn.rollback()
    assert touched["orders"] == [oid]
    assert uid in touched["users"]  # an order write touches its owner's record
    assert touched["products"] == [pid]
    got = changes["orders"][oid]
    assert got["status"] == "cancelled"
    assert got["payment_history"][-1] == {"transaction_type": "refund", "amount": 1.5, "payment_method_id": "x"}
    assert got["payment_history"][:-1] == order["payment_history"]
    assert changes["products"][pid]["variants"][vid]["available"] is not product["variants"][vid]["available"]
    if gift:
        assert changes["users"][uid]["payment_methods"][gift["id"]]["balance"] == gift["balance"] + 1
    else:
        assert uid not in changes["users"]  # touched but equal to the snapshot


async def test_reverted_write_is_no_change_and_delete_is_none(tau_pool: SandboxPool,
                                                              tau_snapshot: Snapshot) -> None:
    oid, order = _pending_order(tau_snapshot, 1)
    oid2, order2 = _pending_order(tau_snapshot, 2)
    async with tau_pool.sandbox() as sb:
        async with sb.conn.begin():
            await sb.conn.execute(text("UPDATE orders SET status = 'x' WHERE id = :id"), {"id": oid})
            await sb.conn.execute(text("UPDATE orders SET status = :s WHERE id = :id"),
                                  {"id": oid, "s": order["status"]})
            await sb.conn.execute(text("DELETE FROM orders WHERE id = :id"), {"id": oid2})
        changes = await sb.changed_records()
        await sb.conn.rollback()
    assert oid not in changes["orders"]
    assert changes["orders"][oid2] is None
    owner = changes["users"][order2["user_id"]]
    assert owner["orders"] == [o for o in tau_snapshot.initial["users"][order2["user_id"]]["orders"] if o != oid2]


async def test_tracker_agrees_with_a_whole_store_diff(tau_pool: SandboxPool, tau_snapshot: Snapshot) -> None:
    """Random SQL writes across all tables: changed_records == diff(initial, full export)."""
    rng = random.Random(7)
    orders = list(tau_snapshot.initial["orders"])
    users = list(tau_snapshot.initial["users"])
    items = [v for p in tau_snapshot.initial["products"].values() for v in p["variants"]]
    writes = [
        ("UPDATE orders SET zip = '00000' WHERE id = :k", orders),
        ("UPDATE order_items SET price = price + 1 WHERE order_id = :k AND seq = 0", orders),
        ("DELETE FROM fulfillments WHERE order_id = :k", orders),
        ("UPDATE payment_transactions SET amount = amount + 0.01 WHERE order_id = :k", orders),
        ("UPDATE customers SET city = 'Nowhere' WHERE id = :k", users),
        ("UPDATE payment_methods SET brand = 'acme' WHERE customer_id = :k AND source = 'credit_card'", users),
        ("UPDATE variants SET price = price + 2 WHERE item_id = :k", items),
        ("UPDATE orders SET customer_seq = customer_seq + 100 WHERE id = :k", orders),
    ]
    async with tau_pool.sandbox() as sb:
        async with sb.conn.begin():
            for _ in range(40):
                sql, keys = rng.choice(writes)
                await sb.conn.execute(text(sql), {"k": rng.choice(keys)})
        changes = await sb.changed_records()
        async with sb.conn.begin():
            final = await export_store(sb.conn)
    expected = diff_stores(tau_snapshot.initial, final)
    assert sum(len(v) for v in expected.values()) > 10
    assert changes == expected
