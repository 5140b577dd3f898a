"""Warming a new sandbox's connection before it is handed out.

The first statements on a new connection to a new database are slow: the server loads its
catalog caches and compiles the change-tracking trigger functions, and asyncpg prepares each
statement. The pool runs every tool once in the background, the writes inside a transaction
that is rolled back, so an episode's first tool call costs what its later ones do. The
sandbox's store (and its change table) is left exactly as the snapshot has it.
"""

from __future__ import annotations

from typing import Any

import structlog

from backend.tools.registry import RETAIL
from rl.env.changes import touched_keys

log = structlog.get_logger(__name__)

Call = tuple[str, dict[str, Any]]
_ADDRESS = {"address1": "1 Warm Street", "address2": "", "city": "Austin", "state": "TX", "country": "USA",
            "zip": "73301"}


def _first_payment(order: dict[str, Any]) -> str:
    return order["payment_history"][0]["payment_method_id"] if order["payment_history"] else ""


def warm_up_calls(initial: dict[str, dict[str, Any]]) -> tuple[list[Call], list[Call]]:
    """(read calls, write calls) that exercise every tool's statements on this store."""
    users, orders, products = initial["users"], initial["orders"], initial["products"]
    if not users or not orders or not products:
        return [], []
    uid, user = next(iter(users.items()))
    reads: list[Call] = [
        ("find_user_id_by_email", {"email": user["email"]}),
        ("find_user_id_by_name_zip", {"first_name": user["name"]["first_name"],
                                      "last_name": user["name"]["last_name"], "zip": user["address"]["zip"]}),
        ("get_user_details", {"user_id": uid}),
        ("get_order_details", {"order_id": next(iter(orders))}),
        ("get_product_details", {"product_id": next(iter(products))}),
        ("list_all_product_types", {}),
    ]
    writes: list[Call] = [("modify_user_address", {"user_id": uid, **_ADDRESS})]
    pending = [(k, o) for k, o in orders.items() if o["status"] == "pending" and o["items"]]
    delivered = [(k, o) for k, o in orders.items() if o["status"] == "delivered" and o["items"]]
    if pending:
        oid, order = pending[0]
        item = order["items"][0]["item_id"]
        writes.append(("modify_pending_order_address", {"order_id": oid, **_ADDRESS}))
        writes.append(("modify_pending_order_items", {"order_id": oid, "item_ids": [item], "new_item_ids": [item],
                                                      "payment_method_id": _first_payment(order)}))
    for oid, order in pending[1:]:
        methods = users[order["user_id"]]["payment_methods"]
        gift = next((pm for pm, rec in methods.items() if rec.get("source") == "gift_card"), None)
        if gift:
            writes.append(("modify_pending_order_payment", {"order_id": oid, "payment_method_id": gift}))
            writes.append(("cancel_pending_order", {"order_id": oid, "reason": "no longer needed"}))
            break
    for oid, order in delivered[:1] + delivered[-1:]:
        item = order["items"][0]["item_id"]
        pm = _first_payment(order)
        writes.append(("return_delivered_order_items", {"order_id": oid, "item_ids": [item],
                                                        "payment_method_id": pm}))
        writes.append(("exchange_delivered_order_items", {"order_id": oid, "item_ids": [item],
                                                          "new_item_ids": [item], "payment_method_id": pm}))
    return reads, writes


async def warm_up(sandbox: Any) -> None:
    """Run every tool once on `sandbox` (writes rolled back); never raises."""
    conn = sandbox.conn
    try:
        from rl.env.gold import ensure_tools_registered

        ensure_tools_registered()
        reads, writes = warm_up_calls(sandbox.snapshot.initial)
        ctx = sandbox.tool_context(upstream_compat=False)
        for name, args in reads:
            if name in RETAIL:
                await RETAIL.call(ctx, name, args)
        async with conn.begin() as tx:
            for name, args in writes:
                if name in RETAIL:
                    await RETAIL.call(ctx, name, args)
            await touched_keys(conn)
            await tx.rollback()
    except Exception as e:  # a cold sandbox still works; it is only slower on first use
        log.warning("sandbox.warm_up_failed", name=getattr(sandbox, "name", "?"), error=str(e))
        if conn.in_transaction():
            await conn.rollback()
