"""Shared data access for the retail tools: row-locked loads of orders and payment
methods, number handling per mode, and writing a changed order back."""

from __future__ import annotations

import copy
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlalchemy import text

from backend.store.records import (
    Record,
    fetch_order,
    fetch_products,
    fetch_user,
    plain_numbers,
    save_balance,
    save_order,
)
from backend.tools.context import ToolContext, ToolError

CENT = Decimal("0.01")


def numbers(ctx: ToolContext, record: Record) -> Record:
    """Upstream-compatible mode computes with floats exactly like tau-bench; the default keeps
    exact decimals."""
    return plain_numbers(record) if ctx.upstream_compat else record


def cents(ctx: ToolContext, value: Any) -> Any:
    """Round an amount to cents: Python float rounding upstream, half-up on decimals otherwise."""
    if ctx.upstream_compat:
        return round(value, 2)
    return Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


async def order_for_update(ctx: ToolContext, order_id: str) -> Record:
    """The order record, row-locked for this transaction, after the ownership check."""
    found = await ctx.conn.scalar(
        text("SELECT customer_id FROM orders WHERE id = :id FOR UPDATE"), {"id": order_id}
    )
    if found is None:
        raise ToolError("order not found")
    ctx.check_owner(found, f"order {order_id}", "order not found")
    record = await fetch_order(ctx.conn, order_id)
    assert record is not None
    return numbers(ctx, record)


async def order_for_read(ctx: ToolContext, order_id: str) -> Record:
    record = await fetch_order(ctx.conn, order_id)
    if record is None:
        raise ToolError("order not found")
    ctx.check_owner(record["user_id"], f"order {order_id}", "order not found")
    return record


async def payment_methods_for_update(ctx: ToolContext, user_id: str) -> dict[str, Record]:
    """The user's payment methods (id -> record), row-locked."""
    await ctx.conn.execute(
        text("SELECT 1 FROM payment_methods WHERE customer_id = :u ORDER BY id FOR UPDATE"), {"u": user_id}
    )
    user = await fetch_user(ctx.conn, user_id)
    if user is None:
        raise ToolError("user not found")
    return numbers(ctx, user)["payment_methods"]


async def write_back(
    ctx: ToolContext, order: Record, before: Record, methods: dict[str, Record] | None = None,
    methods_before: dict[str, Record] | None = None,
) -> None:
    """Persist an order changed in memory, and any gift-card balances that changed."""
    await save_order(ctx.conn, order, previous=before)
    if methods is not None and methods_before is not None:
        for pm_id, pm in methods.items():
            if pm.get("balance") != methods_before[pm_id].get("balance"):
                await save_balance(ctx.conn, pm_id, cents(ctx, pm["balance"]))


def snapshot(record: Any) -> Any:
    return copy.deepcopy(record)


def count_check(order: Record, item_ids: list[str], message: str | None = None) -> None:
    """Every requested item (with multiplicity) must be in the order."""
    all_item_ids = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > all_item_ids.count(item_id):
            raise ToolError(message or f"{item_id} not found")


async def price_difference(
    ctx: ToolContext, order: Record, item_ids: list[str], new_item_ids: list[str]
) -> tuple[Any, dict[tuple[str, str], Record]]:
    """The price difference of swapping `item_ids` for `new_item_ids` (same positions, same
    product, available variants only), and the order's products' variants by
    (product_id, item_id). Like tau-bench, a repeated item is priced from its first occurrence."""
    product_ids = {it["product_id"] for it in order["items"]}
    products = numbers(ctx, await fetch_products(ctx.conn, product_ids))
    variants = {(pid, vid): v for pid, p in products.items() for vid, v in p["variants"].items()}
    diff: Any = 0
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = next(it for it in order["items"] if it["item_id"] == item_id)
        variant = variants.get((item["product_id"], new_item_id))
        if variant is None or not variant["available"]:
            raise ToolError(f"new item {new_item_id} not found or available")
        diff += variant["price"] - item["price"]
    return diff, variants


def check_swap(ctx: ToolContext, order: Record, item_ids: list[str], new_item_ids: list[str], verb: str) -> None:
    """The argument checks of an item swap (modify or exchange), in tau-bench's order."""
    count_check(order, item_ids)
    if len(item_ids) != len(new_item_ids):
        raise ToolError("the number of items to be exchanged should match")
    if not item_ids and not ctx.upstream_compat:
        raise ToolError(f"no items to {verb}")
