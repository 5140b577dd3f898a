"""Order tools: read an order, and change a *pending* order (cancel it, or change its
address, payment method or items). Each write runs in one transaction with the order and
the customer's payment methods row-locked, checks everything before writing, and returns
the updated order."""

from __future__ import annotations

from typing import Literal

from backend.store.records import dumps
from backend.tools.context import ToolContext, ToolError
from backend.tools.registry import ToolKind, tool
from backend.tools.retail.access import (
    cents,
    check_swap,
    order_for_read,
    order_for_update,
    payment_methods_for_update,
    price_difference,
    snapshot,
    write_back,
)
from backend.tools.retail.money import net_paid_by_method

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


@tool(ToolKind.READ)
async def get_order_details(ctx: ToolContext, order_id: str) -> str:
    """Get an order: status, shipping address, items, fulfillments and payment history.

    Args:
        order_id: The order id, such as '#W0000000'. Order ids start with a '#'.
    """
    return dumps(await order_for_read(ctx, order_id))


@tool(ToolKind.WRITE)
async def cancel_pending_order(
    ctx: ToolContext, order_id: str, reason: Literal["no longer needed", "ordered by mistake"]
) -> str:
    """Cancel a pending order (processed or delivered orders cannot be cancelled). Explain the
    cancellation and get an explicit yes before calling. Payments are refunded: to a gift card
    at once, to other methods within 5-7 business days. Returns the cancelled order.

    Args:
        order_id: The order id, such as '#W0000000'. Order ids start with a '#'.
        reason: Why the order is cancelled: 'no longer needed' or 'ordered by mistake'.
    """
    order = await order_for_update(ctx, order_id)
    if order["status"] != "pending":
        raise ToolError("non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError("invalid reason")
    before = snapshot(order)
    methods = await payment_methods_for_update(ctx, order["user_id"])
    methods_before = snapshot(methods)

    if ctx.upstream_compat:
        # tau-bench refunds every history entry, earlier refunds included.
        refunds = [(p["payment_method_id"], p["amount"]) for p in order["payment_history"]]
    else:
        refunds = [(pm, amount) for pm, amount in net_paid_by_method(order["payment_history"]) if amount > 0]
    for pm_id, amount in refunds:
        if "gift_card" in pm_id:  # gift cards are refunded immediately
            if pm_id not in methods:
                raise ToolError(f"payment method {pm_id} not found")
            methods[pm_id]["balance"] = cents(ctx, methods[pm_id]["balance"] + amount)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(
        {"transaction_type": "refund", "amount": amount, "payment_method_id": pm_id} for pm_id, amount in refunds
    )
    await write_back(ctx, order, before, methods, methods_before)
    return dumps(order)


@tool(ToolKind.WRITE)
async def modify_pending_order_address(
    ctx: ToolContext, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
) -> str:
    """Change the shipping address of a pending order. Explain the change and get an explicit
    yes before calling. Returns the updated order.

    Args:
        order_id: The order id, such as '#W0000000'. Order ids start with a '#'.
        address1: The first line of the address, such as '123 Main St'.
        address2: The second line of the address, such as 'Apt 1' or ''.
        city: The city, such as 'San Francisco'.
        state: The state or province, such as 'CA'.
        country: The country, such as 'USA'.
        zip: The zip code, such as '12345'.
    """
    order = await order_for_update(ctx, order_id)
    if order["status"] != "pending":
        raise ToolError("non-pending order cannot be modified")
    before = snapshot(order)
    order["address"] = {"address1": address1, "address2": address2, "city": city, "state": state,
                        "country": country, "zip": zip}
    await write_back(ctx, order, before)
    return dumps(order)


@tool(ToolKind.WRITE)
async def modify_pending_order_payment(ctx: ToolContext, order_id: str, payment_method_id: str) -> str:
    """Pay for a pending order with another of the customer's payment methods. Explain the change
    and get an explicit yes before calling. Returns the updated order.

    Args:
        order_id: The order id, such as '#W0000000'. Order ids start with a '#'.
        payment_method_id: The new payment method's id, such as 'gift_card_0000000' or
            'credit_card_0000000'; find it in the customer's or the order's details.
    """
    order = await order_for_update(ctx, order_id)
    if order["status"] != "pending":
        raise ToolError("non-pending order cannot be modified")
    methods = await payment_methods_for_update(ctx, order["user_id"])
    if payment_method_id not in methods:
        raise ToolError("payment method not found")
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolError("there should be exactly one payment for a pending order")
    old_pm = history[0]["payment_method_id"]
    if old_pm == payment_method_id:
        raise ToolError("the new payment method should be different from the current one")
    amount = history[0]["amount"]
    new_method = methods[payment_method_id]
    if new_method["source"] == "gift_card" and new_method["balance"] < amount:
        raise ToolError("insufficient gift card balance to pay for the order")

    before, methods_before = snapshot(order), snapshot(methods)
    history.extend([
        {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
        {"transaction_type": "refund", "amount": amount, "payment_method_id": old_pm},
    ])
    if new_method["source"] == "gift_card":
        new_method["balance"] = cents(ctx, new_method["balance"] - amount)
    if "gift_card" in old_pm and old_pm in methods:
        methods[old_pm]["balance"] = cents(ctx, methods[old_pm]["balance"] + amount)
    await write_back(ctx, order, before, methods, methods_before)
    return dumps(order)


@tool(ToolKind.WRITE)
async def modify_pending_order_items(
    ctx: ToolContext, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
) -> str:
    """Swap items of a pending order for other variants of the same product. This can be done
    only once per order. Explain the swap and the price difference and get an explicit yes
    before calling. Returns the updated order.

    Args:
        order_id: The order id, such as '#W0000000'. Order ids start with a '#'.
        item_ids: The item ids to replace, such as ['1008292230']. The list may repeat an item.
        new_item_ids: The replacement item ids, in the same positions as item_ids; each must be an
            available variant of the same product. The list may repeat an item.
        payment_method_id: The payment method that pays or receives the price difference, such as
            'gift_card_0000000' or 'credit_card_0000000'.
    """
    order = await order_for_update(ctx, order_id)
    if order["status"] != "pending":
        raise ToolError("non-pending order cannot be modified")
    check_swap(ctx, order, item_ids, new_item_ids, "modify")
    diff_price, variants = await price_difference(ctx, order, item_ids, new_item_ids)

    methods = await payment_methods_for_update(ctx, order["user_id"])
    if payment_method_id not in methods:
        raise ToolError("payment method not found")
    method = methods[payment_method_id]
    if method["source"] == "gift_card" and method["balance"] < diff_price:
        raise ToolError("insufficient gift card balance to pay for the new item")

    before, methods_before = snapshot(order), snapshot(methods)
    if ctx.upstream_compat or diff_price != 0:
        order["payment_history"].append({
            "transaction_type": "payment" if diff_price > 0 else "refund",
            "amount": abs(diff_price) if ctx.upstream_compat else cents(ctx, abs(diff_price)),
            "payment_method_id": payment_method_id,
        })
    if method["source"] == "gift_card":
        method["balance"] = cents(ctx, method["balance"] - diff_price)
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
        item = next(it for it in order["items"] if it["item_id"] == item_id)
        variant = variants[(item["product_id"], new_item_id)]
        item["item_id"] = new_item_id
        item["price"] = variant["price"]
        item["options"] = variant["options"]
    order["status"] = "pending (item modified)"
    await write_back(ctx, order, before, methods, methods_before)
    return dumps(order)
