"""An independent, in-memory model of tau-bench retail's tool semantics, used as a test
oracle: the Postgres tools in upstream-compatible mode must give the same outputs and
reach the same store state for the same well-typed calls.

Written from REFERENCE.md's description of upstream behaviour; it operates on the store in
tau-bench's JSON shape (plain dicts, floats), exactly like upstream does.
"""

from __future__ import annotations

import json
from typing import Any

Data = dict[str, Any]


class Refusal(Exception):
    pass


def _order(data: Data, order_id: str) -> dict:
    if order_id not in data["orders"]:
        raise Refusal("order not found")
    return data["orders"][order_id]


def _methods(data: Data, order: dict) -> dict:
    return data["users"][order["user_id"]]["payment_methods"]


def _count_check(order: dict, item_ids: list[str], message: str | None = None) -> None:
    all_ids = [it["item_id"] for it in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > all_ids.count(item_id):
            raise Refusal(message or f"{item_id} not found")


def _price_difference(data: Data, order: dict, item_ids: list[str], new_item_ids: list[str]) -> float:
    diff = 0
    for old, new in zip(item_ids, new_item_ids, strict=False):
        item = [it for it in order["items"] if it["item_id"] == old][0]
        variants = data["products"][item["product_id"]]["variants"]
        if not (new in variants and variants[new]["available"]):
            raise Refusal(f"new item {new} not found or available")
        diff += variants[new]["price"] - item["price"]
    return diff


def find_user_id_by_email(data: Data, email: str) -> str:
    for uid, u in data["users"].items():
        if u["email"].lower() == email.lower():
            return uid
    raise Refusal("user not found")


def find_user_id_by_name_zip(data: Data, first_name: str, last_name: str, zip: str) -> str:
    for uid, u in data["users"].items():
        if (u["name"]["first_name"].lower() == first_name.lower()
                and u["name"]["last_name"].lower() == last_name.lower() and u["address"]["zip"] == zip):
            return uid
    raise Refusal("user not found")


def get_user_details(data: Data, user_id: str) -> str:
    if user_id not in data["users"]:
        raise Refusal("user not found")
    return json.dumps(data["users"][user_id])


def get_order_details(data: Data, order_id: str) -> str:
    return json.dumps(_order(data, order_id))


def get_product_details(data: Data, product_id: str) -> str:
    if product_id not in data["products"]:
        raise Refusal("product not found")
    return json.dumps(data["products"][product_id])


def list_all_product_types(data: Data) -> str:
    return json.dumps(dict(sorted({p["name"]: p["product_id"] for p in data["products"].values()}.items())))


def calculate(data: Data, expression: str) -> str:
    if not all(c in "0123456789+-*/(). " for c in expression):
        raise Refusal("invalid characters in expression")
    return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))


def think(data: Data, thought: str) -> str:
    return ""


def transfer_to_human_agents(data: Data, summary: str) -> str:
    return "Transfer successful"


def cancel_pending_order(data: Data, order_id: str, reason: str) -> str:
    order = _order(data, order_id)
    if order["status"] != "pending":
        raise Refusal("non-pending order cannot be cancelled")
    if reason not in ("no longer needed", "ordered by mistake"):
        raise Refusal("invalid reason")
    refunds = []
    for p in order["payment_history"]:
        pm_id = p["payment_method_id"]
        refunds.append({"transaction_type": "refund", "amount": p["amount"], "payment_method_id": pm_id})
        if "gift_card" in p["payment_method_id"]:
            pm = _methods(data, order)[p["payment_method_id"]]
            pm["balance"] = round(pm["balance"] + p["amount"], 2)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return json.dumps(order)


def modify_pending_order_address(data: Data, order_id: str, address1: str, address2: str, city: str,
                                 state: str, country: str, zip: str) -> str:
    order = _order(data, order_id)
    if order["status"] != "pending":
        raise Refusal("non-pending order cannot be modified")
    order["address"] = {"address1": address1, "address2": address2, "city": city, "state": state,
                        "country": country, "zip": zip}
    return json.dumps(order)


def modify_user_address(data: Data, user_id: str, address1: str, address2: str, city: str, state: str,
                        country: str, zip: str) -> str:
    if user_id not in data["users"]:
        raise Refusal("user not found")
    user = data["users"][user_id]
    user["address"] = {"address1": address1, "address2": address2, "city": city, "state": state,
                       "country": country, "zip": zip}
    return json.dumps(user)


def modify_pending_order_payment(data: Data, order_id: str, payment_method_id: str) -> str:
    order = _order(data, order_id)
    if order["status"] != "pending":
        raise Refusal("non-pending order cannot be modified")
    methods = _methods(data, order)
    if payment_method_id not in methods:
        raise Refusal("payment method not found")
    hist = order["payment_history"]
    if len(hist) > 1 or hist[0]["transaction_type"] != "payment":
        raise Refusal("there should be exactly one payment for a pending order")
    old = hist[0]["payment_method_id"]
    if old == payment_method_id:
        raise Refusal("the new payment method should be different from the current one")
    amount = hist[0]["amount"]
    pm = methods[payment_method_id]
    if pm["source"] == "gift_card" and pm["balance"] < amount:
        raise Refusal("insufficient gift card balance to pay for the order")
    hist.extend([{"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
                 {"transaction_type": "refund", "amount": amount, "payment_method_id": old}])
    if pm["source"] == "gift_card":
        pm["balance"] = round(pm["balance"] - amount, 2)
    if "gift_card" in old:
        methods[old]["balance"] = round(methods[old]["balance"] + amount, 2)
    return json.dumps(order)


def modify_pending_order_items(data: Data, order_id: str, item_ids: list[str], new_item_ids: list[str],
                               payment_method_id: str) -> str:
    order = _order(data, order_id)
    if order["status"] != "pending":
        raise Refusal("non-pending order cannot be modified")
    _count_check(order, item_ids)
    if len(item_ids) != len(new_item_ids):
        raise Refusal("the number of items to be exchanged should match")
    diff = _price_difference(data, order, item_ids, new_item_ids)
    methods = _methods(data, order)
    if payment_method_id not in methods:
        raise Refusal("payment method not found")
    pm = methods[payment_method_id]
    if pm["source"] == "gift_card" and pm["balance"] < diff:
        raise Refusal("insufficient gift card balance to pay for the new item")
    order["payment_history"].append({"transaction_type": "payment" if diff > 0 else "refund",
                                     "amount": abs(diff), "payment_method_id": payment_method_id})
    if pm["source"] == "gift_card":
        pm["balance"] = round(pm["balance"] - diff, 2)
    for old, new in zip(item_ids, new_item_ids, strict=False):
        item = [it for it in order["items"] if it["item_id"] == old][0]
        variant = data["products"][item["product_id"]]["variants"][new]
        item["item_id"], item["price"], item["options"] = new, variant["price"], variant["options"]
    order["status"] = "pending (item modified)"
    return json.dumps(order)


def return_delivered_order_items(data: Data, order_id: str, item_ids: list[str], payment_method_id: str) -> str:
    order = _order(data, order_id)
    if order["status"] != "delivered":
        raise Refusal("non-delivered order cannot be returned")
    if payment_method_id not in _methods(data, order):
        raise Refusal("payment method not found")
    if "gift_card" not in payment_method_id and payment_method_id != order["payment_history"][0]["payment_method_id"]:
        raise Refusal("payment method should be either the original payment method or a gift card")
    _count_check(order, item_ids, "some item not found")
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return json.dumps(order)


def exchange_delivered_order_items(data: Data, order_id: str, item_ids: list[str], new_item_ids: list[str],
                                   payment_method_id: str) -> str:
    order = _order(data, order_id)
    if order["status"] != "delivered":
        raise Refusal("non-delivered order cannot be exchanged")
    _count_check(order, item_ids)
    if len(item_ids) != len(new_item_ids):
        raise Refusal("the number of items to be exchanged should match")
    diff = round(_price_difference(data, order, item_ids, new_item_ids), 2)
    methods = _methods(data, order)
    if payment_method_id not in methods:
        raise Refusal("payment method not found")
    pm = methods[payment_method_id]
    if pm["source"] == "gift_card" and pm["balance"] < diff:
        raise Refusal("insufficient gift card balance to pay for the price difference")
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = diff
    return json.dumps(order)


TOOLS = {f.__name__: f for f in (
    find_user_id_by_email, find_user_id_by_name_zip, get_user_details, get_order_details, get_product_details,
    list_all_product_types, calculate, think, transfer_to_human_agents, cancel_pending_order,
    modify_pending_order_address, modify_user_address, modify_pending_order_payment, modify_pending_order_items,
    return_delivered_order_items, exchange_delivered_order_items,
)}


def call(data: Data, name: str, kwargs: dict[str, Any]) -> str:
    """What the model sees from upstream for a well-typed call."""
    if name not in TOOLS:
        return f"Unknown action {name}"
    try:
        return TOOLS[name](data, **kwargs)
    except Refusal as e:
        return f"Error: {e}"
    except Exception as e:
        return f"Error: {e}"
