"""Store records in tau-bench's JSON shape, read from and written to Postgres.

A *record* is what tau-bench keeps per key: a user (name, address, email, payment
methods, order ids), an order (address, items, fulfillments, status, payment history and
request fields) or a product (name and variants). Tools, the exporter, the reward and the
sandbox diff all speak records, so there is exactly one mapping between rows and records.

Numbers come back as `Decimal` (exact); `plain_numbers()` turns them into floats for the
JSON the model sees and for tau-bench's float arithmetic in compatibility mode.
Each fetch is a single round trip (JSON aggregated in SQL).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal
from functools import lru_cache
from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection

Record = dict[str, Any]

ADDRESS_KEYS = ("address1", "address2", "city", "country", "state", "zip")
ORDER_REQUEST_KEYS = (
    "cancel_reason",
    "return_items",
    "return_payment_method_id",
    "exchange_items",
    "exchange_new_items",
    "exchange_payment_method_id",
    "exchange_price_difference",
)

_USER_SQL = """
SELECT c.id, json_build_object(
  'name', json_build_object('first_name', c.first_name, 'last_name', c.last_name),
  'address', json_build_object('address1', c.address1, 'address2', c.address2, 'city', c.city,
                               'country', c.country, 'state', c.state, 'zip', c.zip),
  'email', c.email,
  'payment_methods', COALESCE((SELECT json_agg(json_build_object(
        'id', p.id, 'source', p.source, 'brand', p.brand, 'last_four', p.last_four,
        'balance', p.balance, 'extra', p.extra) ORDER BY p.seq)
      FROM payment_methods p WHERE p.customer_id = c.id), '[]'::json),
  'orders', COALESCE((SELECT json_agg(o.id ORDER BY o.customer_seq)
      FROM orders o WHERE o.customer_id = c.id), '[]'::json)
)::text
FROM customers c
"""

_ORDER_SQL = """
SELECT o.id, json_build_object(
  'order_id', o.id, 'user_id', o.customer_id,
  'address', json_build_object('address1', o.address1, 'address2', o.address2, 'city', o.city,
                               'country', o.country, 'state', o.state, 'zip', o.zip),
  'items', COALESCE((SELECT json_agg(json_build_object('name', i.name, 'product_id', i.product_id,
        'item_id', i.item_id, 'price', i.price, 'options', i.options) ORDER BY i.seq)
      FROM order_items i WHERE i.order_id = o.id), '[]'::json),
  'fulfillments', COALESCE((SELECT json_agg(json_build_object('tracking_id', f.tracking_ids,
        'item_ids', f.item_ids) ORDER BY f.seq)
      FROM fulfillments f WHERE f.order_id = o.id), '[]'::json),
  'status', o.status,
  'payment_history', COALESCE((SELECT json_agg(json_build_object('transaction_type', t.transaction_type,
        'amount', t.amount, 'payment_method_id', t.payment_method_id) ORDER BY t.seq)
      FROM payment_transactions t WHERE t.order_id = o.id), '[]'::json),
  'cancel_reason', o.cancel_reason,
  'return_items', o.return_items,
  'return_payment_method_id', o.return_payment_method_id,
  'exchange_items', o.exchange_items,
  'exchange_new_items', o.exchange_new_items,
  'exchange_payment_method_id', o.exchange_payment_method_id,
  'exchange_price_difference', o.exchange_price_difference
)::text
FROM orders o
"""

_PRODUCT_SQL = """
SELECT pr.id, json_build_object(
  'name', pr.name, 'product_id', pr.id,
  'variants', COALESCE((SELECT json_agg(json_build_object('item_id', v.item_id, 'options', v.options,
        'available', v.available, 'price', v.price) ORDER BY v.seq)
      FROM variants v WHERE v.product_id = pr.id), '[]'::json)
)::text
FROM products pr
"""


def _loads(raw: str) -> Any:
    return json.loads(raw, parse_float=Decimal, parse_int=Decimal)


def _user_from_json(raw: str) -> Record:
    doc = _loads(raw)
    methods: dict[str, Any] = {}
    for pm in doc["payment_methods"]:
        methods[pm["id"]] = _payment_method_record(pm)
    return {
        "name": doc["name"],
        "address": doc["address"],
        "email": doc["email"],
        "payment_methods": methods,
        "orders": doc["orders"],
    }


def _payment_method_record(pm: dict[str, Any]) -> Record:
    rec: Record = {"source": pm["source"]}
    if pm["brand"] is not None:
        rec["brand"] = pm["brand"]
    if pm["last_four"] is not None:
        rec["last_four"] = pm["last_four"]
    if pm["balance"] is not None:
        rec["balance"] = pm["balance"]
    if pm.get("extra"):
        rec.update(pm["extra"])
    rec["id"] = pm["id"]
    return rec


def _order_from_json(raw: str) -> Record:
    doc = _loads(raw)
    for key in ORDER_REQUEST_KEYS:
        if doc.get(key) is None:
            doc.pop(key, None)
    return doc


def _product_from_json(raw: str) -> Record:
    doc = _loads(raw)
    doc["variants"] = {v["item_id"]: v for v in doc["variants"]}
    return doc


@lru_cache(maxsize=32)
def _statement(sql: str, alias: str, order_by: str, by_ids: bool) -> TextClause:
    where = f" WHERE {alias}.id = ANY(:ids)" if by_ids else ""
    return text(f"{sql}{where} ORDER BY {alias}.{order_by}")


async def _fetch(conn: AsyncConnection, sql: str, alias: str, ids: Iterable[str] | None,
                 order_by: str, parse) -> dict[str, Record]:
    if ids is None:
        rows = await conn.execute(_statement(sql, alias, order_by, False))
    else:
        id_list = list(dict.fromkeys(ids))
        if not id_list:
            return {}
        rows = await conn.execute(_statement(sql, alias, order_by, True), {"ids": id_list})
    return {row[0]: parse(row[1]) for row in rows}


async def fetch_users(conn: AsyncConnection, ids: Iterable[str] | None = None) -> dict[str, Record]:
    """User records by id (all users when `ids` is None), in store order."""
    return await _fetch(conn, _USER_SQL, "c", ids, "seq", _user_from_json)


async def fetch_orders(conn: AsyncConnection, ids: Iterable[str] | None = None) -> dict[str, Record]:
    """Order records by id (all orders when `ids` is None), in store order."""
    return await _fetch(conn, _ORDER_SQL, "o", ids, "seq", _order_from_json)


async def fetch_products(conn: AsyncConnection, ids: Iterable[str] | None = None) -> dict[str, Record]:
    """Product records by id (all products when `ids` is None), in store order."""
    return await _fetch(conn, _PRODUCT_SQL, "pr", ids, "seq", _product_from_json)


async def fetch_user(conn: AsyncConnection, user_id: str) -> Record | None:
    return (await fetch_users(conn, [user_id])).get(user_id)


async def fetch_order(conn: AsyncConnection, order_id: str) -> Record | None:
    return (await fetch_orders(conn, [order_id])).get(order_id)


async def fetch_product(conn: AsyncConnection, product_id: str) -> Record | None:
    return (await fetch_products(conn, [product_id])).get(product_id)


def plain_numbers(value: Any) -> Any:
    """A deep copy of `value` with every Decimal turned into an int or float."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: plain_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_numbers(v) for v in value]
    return value


def to_decimal(value: Any) -> Decimal:
    """Exact Decimal of a number (floats via their shortest repr, as tau-bench prints them)."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, bool):
        raise TypeError("boolean is not an amount")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    raise TypeError(f"not a number: {value!r}")


def dumps(value: Any) -> str:
    """`json.dumps` exactly as tau-bench prints records (ASCII-escaped, default separators)."""
    return json.dumps(plain_numbers(value))


# ---------------------------------------------------------------- writing records back


async def save_order(conn: AsyncConnection, order: Record, *, previous: Record | None = None) -> None:
    """Write an order record's mutable parts back: status, address, request fields, items and
    payment history. Parts equal to `previous` are not rewritten."""
    oid = order["order_id"]
    addr = order["address"]
    params: dict[str, Any] = {
        "id": oid,
        "status": order["status"],
        **{k: addr.get(k) for k in ADDRESS_KEYS},
        "cancel_reason": order.get("cancel_reason"),
        "return_items": _json_or_none(order.get("return_items")),
        "return_payment_method_id": order.get("return_payment_method_id"),
        "exchange_items": _json_or_none(order.get("exchange_items")),
        "exchange_new_items": _json_or_none(order.get("exchange_new_items")),
        "exchange_payment_method_id": order.get("exchange_payment_method_id"),
        "exchange_price_difference": _num_or_none(order.get("exchange_price_difference")),
    }
    await conn.execute(
        text(
            """UPDATE orders SET status = :status, address1 = :address1, address2 = :address2,
               city = :city, country = :country, state = :state, zip = :zip,
               cancel_reason = :cancel_reason, return_items = CAST(:return_items AS jsonb),
               return_payment_method_id = :return_payment_method_id,
               exchange_items = CAST(:exchange_items AS jsonb),
               exchange_new_items = CAST(:exchange_new_items AS jsonb),
               exchange_payment_method_id = :exchange_payment_method_id,
               exchange_price_difference = :exchange_price_difference
               WHERE id = :id"""
        ),
        params,
    )
    if previous is None or previous["items"] != order["items"]:
        await conn.execute(text("DELETE FROM order_items WHERE order_id = :id"), {"id": oid})
        await insert_order_items(conn, oid, order["items"])
    old_history = previous["payment_history"] if previous is not None else None
    if old_history is None or old_history != order["payment_history"]:
        history = order["payment_history"]
        start = 0
        if old_history is not None and history[: len(old_history)] == old_history:
            start = len(old_history)  # append-only change: insert the new entries only
        else:
            await conn.execute(text("DELETE FROM payment_transactions WHERE order_id = :id"), {"id": oid})
        await insert_payments(conn, oid, history, start=start)


async def insert_order_items(conn: AsyncConnection, order_id: str, items: list[Record]) -> None:
    if not items:
        return
    await conn.execute(
        text(
            """INSERT INTO order_items (order_id, seq, item_id, product_id, name, options, price)
               VALUES (:order_id, :seq, :item_id, :product_id, :name, CAST(:options AS jsonb), :price)"""
        ),
        [
            {
                "order_id": order_id,
                "seq": i,
                "item_id": it["item_id"],
                "product_id": it["product_id"],
                "name": it["name"],
                "options": json.dumps(plain_numbers(it["options"])),
                "price": to_decimal(it["price"]),
            }
            for i, it in enumerate(items)
        ],
    )


async def insert_payments(conn: AsyncConnection, order_id: str, history: list[Record], *, start: int = 0) -> None:
    rows = [
        {
            "order_id": order_id,
            "seq": i,
            "transaction_type": t["transaction_type"],
            "amount": to_decimal(t["amount"]),
            "payment_method_id": t["payment_method_id"],
        }
        for i, t in enumerate(history)
        if i >= start
    ]
    if rows:
        await conn.execute(
            text(
                """INSERT INTO payment_transactions (order_id, seq, transaction_type, amount, payment_method_id)
                   VALUES (:order_id, :seq, :transaction_type, :amount, :payment_method_id)"""
            ),
            rows,
        )


async def save_user_address(conn: AsyncConnection, user_id: str, address: Record) -> None:
    await conn.execute(
        text(
            """UPDATE customers SET address1 = :address1, address2 = :address2, city = :city,
               country = :country, state = :state, zip = :zip WHERE id = :id"""
        ),
        {"id": user_id, **{k: address.get(k) for k in ADDRESS_KEYS}},
    )


async def save_balance(conn: AsyncConnection, payment_method_id: str, balance: Any) -> None:
    await conn.execute(
        text("UPDATE payment_methods SET balance = :b WHERE id = :id"),
        {"id": payment_method_id, "b": to_decimal(balance)},
    )


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(plain_numbers(value))


def _num_or_none(value: Any) -> Decimal | None:
    return None if value is None else to_decimal(value)
