"""Change tracking: which top-level store records a sandbox has touched, and how they differ.

A snapshot gets row triggers on every store table that note the *record* a changed row belongs
to in a small `muarl_changed_records(kind, key)` table: `users` by customer id (customers, and
payment methods by their customer), `orders` by order id (orders, order items, fulfillments,
payment transactions), `products` by product id (products, variants). An order also touches its
owning user, whose `orders` list is derived from the orders table. Sandboxes are copies of the
snapshot, so they inherit the (empty) table and the triggers; `changed_records` then reads only
the touched records back and keeps those that now differ from the snapshot's initial data. A
diff or a reward therefore costs O(changes), not O(store).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.records import fetch_orders, fetch_products, fetch_users, plain_numbers

CHANGES_TABLE = "muarl_changed_records"
KINDS = ("users", "orders", "products")
Changes = dict[str, dict[str, Any]]

# table -> [(kind, column holding the record key)]; OLD and NEW rows are both noted.
TRACKED_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "customers": (("users", "id"),),
    "payment_methods": (("users", "customer_id"),),
    "products": (("products", "id"),),
    "variants": (("products", "product_id"),),
    "orders": (("orders", "id"), ("users", "customer_id")),
    "order_items": (("orders", "order_id"),),
    "fulfillments": (("orders", "order_id"),),
    "payment_transactions": (("orders", "order_id"),),
}


def _trigger_function_sql(table: str) -> str:
    def notes(row: str) -> str:
        return "\n".join(
            f"    INSERT INTO {CHANGES_TABLE} (kind, key) VALUES ('{kind}', {row}.{col}) ON CONFLICT DO NOTHING;"
            for kind, col in TRACKED_TABLES[table]
        )

    return f"""
CREATE OR REPLACE FUNCTION muarl_note_{table}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
{notes("OLD")}
  END IF;
  IF TG_OP <> 'DELETE' THEN
{notes("NEW")}
  END IF;
  RETURN NULL;
END $$;
"""


async def install_change_tracking(conn: AsyncConnection) -> None:
    """Create the changes table and a row trigger on each store table (caller owns the transaction)."""
    await conn.execute(text(
        f"CREATE TABLE IF NOT EXISTS {CHANGES_TABLE} ("
        "kind text NOT NULL CHECK (kind IN ('users', 'orders', 'products', 'truncated')), "
        "key text NOT NULL, PRIMARY KEY (kind, key))"
    ))
    for table in TRACKED_TABLES:
        await conn.execute(text(_trigger_function_sql(table)))
        await conn.execute(text(f"DROP TRIGGER IF EXISTS muarl_note_changes ON {table}"))
        await conn.execute(text(
            f"CREATE TRIGGER muarl_note_changes AFTER INSERT OR UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION muarl_note_{table}()"
        ))
    # TRUNCATE fires no row triggers: note it, so a truncated sandbox is never taken for a fresh one.
    await conn.execute(text(
        "CREATE OR REPLACE FUNCTION muarl_note_truncate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"INSERT INTO {CHANGES_TABLE} (kind, key) VALUES ('truncated', TG_TABLE_NAME) ON CONFLICT DO NOTHING; "
        "RETURN NULL; END $$"
    ))
    for table in TRACKED_TABLES:
        await conn.execute(text(f"DROP TRIGGER IF EXISTS muarl_note_truncate ON {table}"))
        await conn.execute(text(
            f"CREATE TRIGGER muarl_note_truncate AFTER TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION muarl_note_truncate()"
        ))


async def is_pristine(conn: AsyncConnection) -> bool:
    """True when nothing in the store was written since the snapshot (every write is noted)."""
    return bool(await conn.scalar(text(f"SELECT NOT EXISTS (SELECT 1 FROM {CHANGES_TABLE})")))


async def touched_keys(conn: AsyncConnection) -> dict[str, list[str]]:
    """The keys of every record touched since the snapshot, by kind (changed or not)."""
    touched: dict[str, list[str]] = {k: [] for k in KINDS}
    for kind, key in await conn.execute(text(f"SELECT kind, key FROM {CHANGES_TABLE} ORDER BY kind, key")):
        if kind == "truncated":
            raise RuntimeError(f"table {key} was truncated in this sandbox: its changes cannot be listed")
        touched[kind].append(key)
    return touched


async def changed_records(conn: AsyncConnection, snapshot: Any) -> Changes:
    """Records (tau JSON shape, plain numbers) that differ from `snapshot.initial`; None if deleted.

    Runs in the caller's transaction when there is one (so it sees uncommitted writes), else in
    a short read-only transaction of its own.
    """
    if conn.in_transaction():
        return await _changed_records(conn, snapshot.initial)
    async with conn.begin() as tx:
        result = await _changed_records(conn, snapshot.initial)
        await tx.rollback()
    return result


_FETCHERS = {"users": fetch_users, "orders": fetch_orders, "products": fetch_products}


async def _changed_records(conn: AsyncConnection, initial: dict[str, dict[str, Any]]) -> Changes:
    touched = await touched_keys(conn)
    changes: Changes = {k: {} for k in KINDS}
    for kind in KINDS:
        keys = touched[kind]
        if not keys:
            continue
        current = plain_numbers(await _FETCHERS[kind](conn, keys))
        before = initial[kind]
        for key in keys:
            now = current.get(key)
            if now != before.get(key):
                changes[kind][key] = now
    return changes


def diff_stores(initial: dict[str, dict[str, Any]], final: dict[str, dict[str, Any]]) -> Changes:
    """Records of `final` that differ from `initial` (None where deleted): the same shape as
    `changed_records`, computed from two whole stores (used to check the tracker)."""
    changes: Changes = {k: {} for k in KINDS}
    for kind in KINDS:
        a, b = initial[kind], final[kind]
        for key in dict.fromkeys([*a, *b]):
            if a.get(key) != b.get(key):
                changes[kind][key] = b.get(key)
    return changes
