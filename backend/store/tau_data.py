"""Loading a store from tau-bench's JSON shape and exporting it back.

`load_store(conn, data)` fills empty store tables from `{"users", "orders", "products"}`
(the layout of tau-bench retail's `users.json`, `orders.json`, `products.json`);
`export_store(conn)` returns the same shape, so `export(load(data)) == data` with numbers
compared by value. `read_tau_retail(dir)` reads the three files from a benchmarks folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.records import (
    ADDRESS_KEYS,
    fetch_orders,
    fetch_products,
    fetch_users,
    plain_numbers,
    to_decimal,
)

StoreData = dict[str, dict[str, Any]]
STORE_TABLES_IN_DELETE_ORDER = (
    "payment_transactions",
    "fulfillments",
    "order_items",
    "orders",
    "variants",
    "products",
    "payment_methods",
    "customers",
)
_KNOWN_PM_KEYS = {"id", "source", "brand", "last_four", "balance"}


class StoreDataError(ValueError):
    """The data does not have the shape of a tau-bench retail store."""


def retail_dir(benchmarks_dir: Path) -> Path:
    return Path(benchmarks_dir) / "tau1" / "retail"


def read_tau_retail(benchmarks_dir: Path) -> StoreData:
    """Read `users.json`, `orders.json` and `products.json` of tau-bench retail."""
    folder = retail_dir(benchmarks_dir)
    data: StoreData = {}
    for name in ("users", "orders", "products"):
        path = folder / f"{name}.json"
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} not found: set --data-dir or MUARL_BENCHMARKS_DIR to the benchmarks folder"
            )
        data[name] = json.loads(path.read_text())
    return data


async def store_is_empty(conn: AsyncConnection) -> bool:
    return (await conn.scalar(text("SELECT NOT EXISTS (SELECT 1 FROM customers)"))) and (
        await conn.scalar(text("SELECT NOT EXISTS (SELECT 1 FROM products)"))
    )


async def clear_store(conn: AsyncConnection) -> None:
    await conn.execute(text("TRUNCATE " + ", ".join(STORE_TABLES_IN_DELETE_ORDER)))


async def load_store(conn: AsyncConnection, data: StoreData) -> dict[str, int]:
    """Insert a whole store (caller owns the transaction). Returns counts per kind."""
    _validate(data)
    users, orders, products = data["users"], data["orders"], data["products"]

    await _executemany(
        conn,
        """INSERT INTO customers (id, seq, first_name, last_name, email, address1, address2, city,
           country, state, zip) VALUES (:id, :seq, :first_name, :last_name, :email, :address1,
           :address2, :city, :country, :state, :zip)""",
        [
            {
                "id": uid,
                "seq": i,
                "first_name": u["name"]["first_name"],
                "last_name": u["name"]["last_name"],
                "email": u["email"],
                **{k: u["address"][k] for k in ADDRESS_KEYS},
            }
            for i, (uid, u) in enumerate(users.items())
        ],
    )
    await _executemany(
        conn,
        """INSERT INTO payment_methods (id, customer_id, seq, source, brand, last_four, balance, extra)
           VALUES (:id, :customer_id, :seq, :source, :brand, :last_four, :balance, CAST(:extra AS jsonb))""",
        [
            {
                "id": pm_id,
                "customer_id": uid,
                "seq": j,
                "source": pm["source"],
                "brand": pm.get("brand"),
                "last_four": pm.get("last_four"),
                "balance": to_decimal(pm["balance"]) if "balance" in pm else None,
                "extra": _extra(pm),
            }
            for uid, u in users.items()
            for j, (pm_id, pm) in enumerate(u["payment_methods"].items())
        ],
    )
    await _executemany(
        conn,
        "INSERT INTO products (id, seq, name) VALUES (:id, :seq, :name)",
        [{"id": pid, "seq": i, "name": p["name"]} for i, (pid, p) in enumerate(products.items())],
    )
    await _executemany(
        conn,
        """INSERT INTO variants (item_id, product_id, seq, options, available, price)
           VALUES (:item_id, :product_id, :seq, CAST(:options AS jsonb), :available, :price)""",
        [
            {
                "item_id": vid,
                "product_id": pid,
                "seq": j,
                "options": json.dumps(v["options"]),
                "available": bool(v["available"]),
                "price": to_decimal(v["price"]),
            }
            for pid, p in products.items()
            for j, (vid, v) in enumerate(p["variants"].items())
        ],
    )
    customer_seq = {oid: j for u in users.values() for j, oid in enumerate(u["orders"])}
    await _executemany(
        conn,
        """INSERT INTO orders (id, seq, customer_id, customer_seq, address1, address2, city, country,
           state, zip, status, cancel_reason, return_items, return_payment_method_id, exchange_items,
           exchange_new_items, exchange_payment_method_id, exchange_price_difference)
           VALUES (:id, :seq, :customer_id, :customer_seq, :address1, :address2, :city, :country,
           :state, :zip, :status, :cancel_reason, CAST(:return_items AS jsonb), :return_payment_method_id,
           CAST(:exchange_items AS jsonb), CAST(:exchange_new_items AS jsonb),
           :exchange_payment_method_id, :exchange_price_difference)""",
        [
            {
                "id": oid,
                "seq": i,
                "customer_id": o["user_id"],
                "customer_seq": customer_seq.get(oid, 1_000_000 + i),
                **{k: o["address"][k] for k in ADDRESS_KEYS},
                "status": o["status"],
                "cancel_reason": o.get("cancel_reason"),
                "return_items": _json(o.get("return_items")),
                "return_payment_method_id": o.get("return_payment_method_id"),
                "exchange_items": _json(o.get("exchange_items")),
                "exchange_new_items": _json(o.get("exchange_new_items")),
                "exchange_payment_method_id": o.get("exchange_payment_method_id"),
                "exchange_price_difference": (
                    to_decimal(o["exchange_price_difference"]) if "exchange_price_difference" in o else None
                ),
            }
            for i, (oid, o) in enumerate(orders.items())
        ],
    )
    await _executemany(
        conn,
        """INSERT INTO order_items (order_id, seq, item_id, product_id, name, options, price)
           VALUES (:order_id, :seq, :item_id, :product_id, :name, CAST(:options AS jsonb), :price)""",
        [
            {
                "order_id": oid,
                "seq": j,
                "item_id": it["item_id"],
                "product_id": it["product_id"],
                "name": it["name"],
                "options": json.dumps(it["options"]),
                "price": to_decimal(it["price"]),
            }
            for oid, o in orders.items()
            for j, it in enumerate(o["items"])
        ],
    )
    await _executemany(
        conn,
        """INSERT INTO payment_transactions (order_id, seq, transaction_type, amount, payment_method_id)
           VALUES (:order_id, :seq, :transaction_type, :amount, :payment_method_id)""",
        [
            {
                "order_id": oid,
                "seq": j,
                "transaction_type": t["transaction_type"],
                "amount": to_decimal(t["amount"]),
                "payment_method_id": t["payment_method_id"],
            }
            for oid, o in orders.items()
            for j, t in enumerate(o["payment_history"])
        ],
    )
    await _executemany(
        conn,
        """INSERT INTO fulfillments (order_id, seq, tracking_ids, item_ids)
           VALUES (:order_id, :seq, CAST(:tracking_ids AS jsonb), CAST(:item_ids AS jsonb))""",
        [
            {
                "order_id": oid,
                "seq": j,
                "tracking_ids": json.dumps(f["tracking_id"]),
                "item_ids": json.dumps(f["item_ids"]),
            }
            for oid, o in orders.items()
            for j, f in enumerate(o["fulfillments"])
        ],
    )
    return {"users": len(users), "orders": len(orders), "products": len(products)}


async def export_store(conn: AsyncConnection) -> StoreData:
    """The whole store in tau-bench's JSON shape, numbers as int/float."""
    return {
        "users": plain_numbers(await fetch_users(conn)),
        "orders": plain_numbers(await fetch_orders(conn)),
        "products": plain_numbers(await fetch_products(conn)),
    }


async def _executemany(conn: AsyncConnection, sql: str, rows: list[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(text(sql), rows)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _extra(pm: dict[str, Any]) -> str | None:
    extra = {k: v for k, v in pm.items() if k not in _KNOWN_PM_KEYS}
    return json.dumps(extra) if extra else None


def _validate(data: StoreData) -> None:
    for key in ("users", "orders", "products"):
        if not isinstance(data.get(key), dict):
            raise StoreDataError(f"store data needs a {key!r} object keyed by id")
    for oid, o in data["orders"].items():
        if o.get("user_id") not in data["users"]:
            raise StoreDataError(f"order {oid} belongs to unknown user {o.get('user_id')!r}")
        for it in o.get("items", []):
            if it.get("product_id") not in data["products"]:
                raise StoreDataError(f"order {oid} has an item of unknown product {it.get('product_id')!r}")
    for uid, u in data["users"].items():
        for pm_id, pm in u.get("payment_methods", {}).items():
            if pm.get("source") == "gift_card" and float(pm.get("balance", 0)) < 0:
                raise StoreDataError(f"gift card {pm_id} of {uid} has a negative balance")
