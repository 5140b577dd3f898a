"""Tools for *delivered* orders: request a return or an exchange of some items. Each can be
done once per order; nothing is charged or refunded until the items come back, so these
tools record the request on the order and change no balance."""

from __future__ import annotations

from backend.store.records import dumps
from backend.tools.context import ToolContext, ToolError
from backend.tools.registry import ToolKind, tool
from backend.tools.retail.access import (
    cents,
    check_swap,
    count_check,
    order_for_update,
    payment_methods_for_update,
    price_difference,
    snapshot,
    write_back,
)


@tool(ToolKind.WRITE)
async def return_delivered_order_items(
    ctx: ToolContext, order_id: str, item_ids: list[str], payment_method_id: str
) -> str:
    """Request a return of some items of a delivered order; the order becomes 'return
    requested' and the customer gets an email on how to send the items back. Explain the return
    and get an explicit yes before calling. Returns the updated order.

    Args:
        order_id: The order id, such as '#W0000000'. Order ids start with a '#'.
        item_ids: The item ids to return, such as ['1008292230']. The list may repeat an item.
        payment_method_id: Where the refund goes: the order's original payment method or a gift
            card, such as 'gift_card_0000000' or 'credit_card_0000000'.
    """
    order = await order_for_update(ctx, order_id)
    if order["status"] != "delivered":
        raise ToolError("non-delivered order cannot be returned")
    methods = await payment_methods_for_update(ctx, order["user_id"])
    if payment_method_id not in methods:
        raise ToolError("payment method not found")
    original = order["payment_history"][0]["payment_method_id"] if order["payment_history"] else None
    if "gift_card" not in payment_method_id and payment_method_id != original:
        raise ToolError("payment method should be either the original payment method or a gift card")
    count_check(order, item_ids, "some item not found")
    if not item_ids and not ctx.upstream_compat:
        raise ToolError("no items to return")
    before = snapshot(order)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    await write_back(ctx, order, before)
    return dumps(order)


@tool(ToolKind.WRITE)
async def exchange_delivered_order_items(
    ctx: ToolContext, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    """Request an exchange of some items of a delivered order for other variants of the same
    product; the order becomes 'exchange requested'. Explain the exchange and the price
    difference and get an explicit yes before calling. Returns the updated order.

    Args:
        order_id: The order id, such as '#W0000000'. Order ids start with a '#'.
        item_ids: The item ids to exchange, such as ['1008292230']. The list may repeat an item.
        new_item_ids: The item ids to exchange them for, in the same positions as item_ids; each
            must be an available variant of the same product. The list may repeat an item.
        payment_method_id: The payment method that pays or receives the price difference, such as
            'gift_card_0000000' or 'credit_card_0000000'.
    """
    order = await order_for_update(ctx, order_id)
    if order["status"] != "delivered":
        raise ToolError("non-delivered order cannot be exchanged")
    check_swap(ctx, order, item_ids, new_item_ids, "exchange")
    diff_price, _ = await price_difference(ctx, order, item_ids, new_item_ids)
    diff_price = cents(ctx, diff_price)

    methods = await payment_methods_for_update(ctx, order["user_id"])
    if payment_method_id not in methods:
        raise ToolError("payment method not found")
    method = methods[payment_method_id]
    if method["source"] == "gift_card" and method["balance"] < diff_price:
        raise ToolError("insufficient gift card balance to pay for the price difference")
    before = snapshot(order)
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = diff_price
    await write_back(ctx, order, before)
    return dumps(order)
