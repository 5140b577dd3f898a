"""A checksum of every row of the store's tables, to show that something did not write to it.

`store_checksum(conn)` hashes each store table's rows (as text, in primary-key order) and
returns one digest per table; equal results before and after mean no row was inserted,
updated or deleted in between. Service tables (conversations, registry, cycles) are left out:
they change while customers chat.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.models import Base

STORE_TABLES = ("customers", "payment_methods", "products", "variants", "orders", "order_items", "fulfillments",
                "payment_transactions")


async def store_checksum(conn: AsyncConnection) -> dict[str, str]:
    """Per store table: `<rows>:<md5 of the rows in primary-key order>`."""
    out = {}
    for name in STORE_TABLES:
        table = Base.metadata.tables[name]
        order = ", ".join(f'"{c.name}"' for c in table.primary_key.columns)
        row = (await conn.execute(text(
            f'SELECT count(*), coalesce(md5(string_agg(t::text, \'|\' ORDER BY {order})), \'\') FROM "{name}" t'
        ))).one()
        out[name] = f"{row[0]}:{row[1]}"
    return out
