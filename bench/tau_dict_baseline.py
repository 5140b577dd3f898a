"""The in-memory baseline for bench/env_bench.py: tau-bench's way of resetting and rewarding.

The store is three JSON documents reloaded from disk on every reset; write tools mutate the
dicts (our own compact implementation of the tau1 retail write semantics, as restated in
docs/REFERENCE.md, with Python floats like upstream); the reward hashes the whole data
(sha256 of `str()` of a sorted-tuple form), reloads, replays the gold actions and hashes again.
Nothing here is used by muarl itself; it exists to be measured against.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

Data = dict[str, dict[str, Any]]


class ToolFailed(Exception):
    pass


def load_data(retail_dir: Path) -> Data:
    """tau-bench's reset: read users, orders and products from disk."""
    return {name: json.loads((retail_dir / f"{name}.json").read_text()) for name in ("users", "orders", "products")}


def to_hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, to_hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(to_hashable(v) for v in value)
    return value


def data_hash(data: Data) -> str:
    return hashlib.sha256(str(to_hashable(data)).encode()).hexdigest()


# ------------------------------------------------------------------ write tools on dicts


def _order(data: Data, order_id: str, status: str | None, verb: str) -> dict:
    order = data["orders"].get(order_id)
    if order is None:
        raise ToolFailed("order not found")
    if status and order["status"] != status:
        raise ToolFailed(f"non-{status} order cannot be {verb}")
    return order


def _method(data: Data, user_id: str, pm_id: str) -> dict:
    pm = data["users"][user_id]["payment_methods"].get(pm_id)
    if pm is None:
        raise ToolFailed("payment method not found")
    return pm


def _swap_items(data: Data, order: dict, item_ids: list[str], new_item_ids: list[str]) -> float:
    have = [it["item_id"] for it in order["items"]]
    for item_id in item_ids:
        if have.count(item_id) < item_ids.count(item_id):
            raise ToolFailed(f"{item_id} not found")
    if len(item_ids) != len(new_item_ids):
        raise ToolFailed("the number of items to be exchanged should match")
    diff = 0.0
    for old, new in zip(item_ids, new_item_ids, strict=True):
        item = next(it for it in order["items"] if it["item_id"] == old)
        variant = data["products"][item["product_id"]]["variants"].get(new)
        if variant is None or not variant["available"]:
            raise ToolFailed(f"new item {new} not found or available")
        diff += variant["price"] - item["price"]
    return diff


def cancel_pending_order(data: Data, order_id: str, reason: str) -> str:
    order = _order(data, order_id, "pending", "cancelled")
    if reason not in ("no longer needed", "ordered by mistake"):
        raise ToolFailed("invalid reason")
    refunds = []
    for payment in order["payment_history"]:
        pm_id = payment["payment_method_id"]
        refunds.append({"transaction_type": "refund", "amount": payment["amount"], "payment_method_id": pm_id})
        if "gift_card" in pm_id:
            pm = _method(data, order["user_id"], pm_id)
            pm["balance"] = round(pm["balance"] + payment["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return json.dumps(order)


def modify_pending_order_address(data: Data, order_id: str, address1: str, address2: str, city: str,
                                 state: str, country: str, zip: str) -> str:
    order = _order(data, order_id, "pending", "modified")
    order["address"] = {"address1": address1, "address2": address2, "city": city, "state": state,
                        "country": country, "zip": zip}
    return json.dumps(order)


def modify_user_address(data: Data, user_id: str, address1: str, address2: str, city: str, state: str,
                        country: str, zip: str) -> str:
    user = data["users"].get(user_id)
    if user is None:
        raise ToolFailed("user not found")
    user["address"] = {"address1": address1, "address2": address2, "city": city, "state": state,
                       "country": country, "zip": zip}
    return json.dumps(user)


def modify_pending_order_payment(data: Data, order_id: str, payment_method_id: str) -> str:
    order = _order(data, order_id, "pending", "modified")
    new = _method(data, order["user_id"], payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolFailed("there should be exactly one payment for a pending order")
    old_id, amount = history[0]["payment_method_id"], history[0]["amount"]
    if old_id == payment_method_id:
        raise ToolFailed("the new payment method should be different from the current one")
    if new["source"] == "gift_card" and new["balance"] < amount:
        raise ToolFailed("insufficient gift card balance to pay for the order")
    history.append({"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id})
    history.append({"transaction_type": "refund", "amount": amount, "payment_method_id": old_id})
    if new["source"] == "gift_card":
        new["balance"] = round(new["balance"] - amount, 2)
    old = data["users"][order["user_id"]]["payment_methods"].get(old_id)
    if old is not None and old["source"] == "gift_card":
        old["balance"] = round(old["balance"] + amount, 2)
    return json.dumps(order)


def modify_pending_order_items(data: Data, order_id: str, item_ids: list[str], new_item_ids: list[str],
                               payment_method_id: str) -> str:
    order = _order(data, order_id, "pending", "modified")
    diff = _swap_items(data, order, item_ids, new_item_ids)
    pm = _method(data, order["user_id"], payment_method_id)
    if pm["source"] == "gift_card" and pm["balance"] < diff:
        raise ToolFailed("insufficient gift card balance to pay for the new item")
    order["payment_history"].append({"transaction_type": "payment" if diff > 0 else "refund",
                                     "amount": abs(diff), "payment_method_id": payment_method_id})
    if pm["source"] == "gift_card":
        pm["balance"] = round(pm["balance"] - diff, 2)
    for old, new in zip(item_ids, new_item_ids, strict=True):
        item = next(it for it in order["items"] if it["item_id"] == old)
        variant = data["products"][item["product_id"]]["variants"][new]
        item.update(item_id=new, price=variant["price"], options=variant["options"])
    order["status"] = "pending (item modified)"
    return json.dumps(order)


def return_delivered_order_items(data: Data, order_id: str, item_ids: list[str], payment_method_id: str) -> str:
    order = _order(data, order_id, "delivered", "returned")
    if payment_method_id not in data["users"][order["user_id"]]["payment_methods"]:
        raise ToolFailed("payment method not found")
    if "gift_card" not in payment_method_id and payment_method_id != order["payment_history"][0]["payment_method_id"]:
        raise ToolFailed("payment method should be either the original payment method or a gift card")
    have = [it["item_id"] for it in order["items"]]
    if any(have.count(i) < item_ids.count(i) for i in item_ids):
        raise ToolFailed("some item not found")
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return json.dumps(order)


def exchange_delivered_order_items(data: Data, order_id: str, item_ids: list[str], new_item_ids: list[str],
                                   payment_method_id: str) -> str:
    order = _order(data, order_id, "delivered", "exchanged")
    diff = _swap_items(data, order, item_ids, new_item_ids)
    pm = _method(data, order["user_id"], payment_method_id)
    if pm["source"] == "gift_card" and pm["balance"] < diff:
        raise ToolFailed("insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = round(diff, 2)
    return json.dumps(order)


WRITE_TOOLS = {f.__name__: f for f in (
    cancel_pending_order, modify_pending_order_address, modify_user_address, modify_pending_order_payment,
    modify_pending_order_items, return_delivered_order_items, exchange_delivered_order_items)}


def step(data: Data, name: str, kwargs: dict[str, Any]) -> str:
    tool = WRITE_TOOLS.get(name)
    if tool is None:
        return f"Unknown action {name}"
    try:
        return tool(data, **kwargs)
    except Exception as e:  # tau-bench returns every failure as text
        return f"Error: {e}"


def reward(current: Data, retail_dir: Path, gold_actions: list[dict[str, Any]]) -> float:
    """tau-bench's reward: hash the final data, reload, replay the gold actions, hash again."""
    got = data_hash(current)
    gold = load_data(retail_dir)
    for action in gold_actions:
        if action["name"] != "transfer_to_human_agents":
            step(gold, action["name"], action["kwargs"])
    return 1.0 if data_hash(gold) == got else 0.0
