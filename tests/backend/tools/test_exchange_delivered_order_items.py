"""exchange_delivered_order_items: delivered orders only; each item for another available
variant of its product; records the request and the price difference (rounded to the cent);
no money moves yet."""

from __future__ import annotations

import copy

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import (
    Desk,
    another_users_method,
    first_order,
    methods_of,
    other_variants,
    paid_with,
    same_json,
)


def upstream_exchange(data: dict, order: dict, item_ids: list[str], new_ids: list[str], method: str) -> dict:
    expected = copy.deepcopy(order)
    diff = 0
    for old, new in zip(item_ids, new_ids, strict=True):
        item = [it for it in order["items"] if it["item_id"] == old][0]
        diff += data["products"][item["product_id"]]["variants"][new]["price"] - item["price"]
    expected["status"] = "exchange requested"
    expected["exchange_items"] = sorted(item_ids)
    expected["exchange_new_items"] = sorted(new_ids)
    expected["exchange_payment_method_id"] = method
    expected["exchange_price_difference"] = round(diff, 2)
    return expected


def _exchangeable(data: dict, o: dict, n: int = 2) -> bool:
    return o["status"] == "delivered" and sum(bool(other_variants(data, it)) for it in o["items"]) >= n


@pytest.mark.parametrize("compat", [True, False])
async def test_exchange_two_items(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: _exchangeable(tau_retail, o))
    items = [it for it in order["items"] if other_variants(tau_retail, it)][:2]
    olds = [it["item_id"] for it in reversed(items)]
    news = [other_variants(tau_retail, it)[-1]["item_id"] for it in reversed(items)]
    before = await desk.export()
    out = await desk.json("exchange_delivered_order_items", order_id=order["order_id"], item_ids=olds,
                          new_item_ids=news, payment_method_id=paid_with(order))
    expected = upstream_exchange(tau_retail, order, olds, news, paid_with(order))
    assert same_json(out, expected)
    after = await desk.export()
    assert same_json(after["orders"][order["order_id"]], expected)
    assert same_json(after["users"], before["users"])


def _gift_card_case(data: dict, enough: bool) -> tuple[dict, str, str, str]:
    for order in data["orders"].values():
        if order["status"] != "delivered":
            continue
        gifts = [pm for pm in methods_of(data, order).values() if pm["source"] == "gift_card"]
        for item in order["items"]:
            for v in other_variants(data, item):
                diff = round(v["price"] - item["price"], 2)
                for gift in gifts:
                    if diff > 0 and (gift["balance"] >= diff) == enough:
                        return copy.deepcopy(order), item["item_id"], v["item_id"], gift["id"]
    raise LookupError


@pytest.mark.parametrize("compat", [True, False])
async def test_gift_card_must_cover_a_positive_difference(store_conn: AsyncConnection, tau_retail: dict,
                                                          compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order, old, new, gift = _gift_card_case(tau_retail, enough=False)
    await desk.refuses("Error: insufficient gift card balance to pay for the price difference",
                       "exchange_delivered_order_items", order_id=order["order_id"], item_ids=[old],
                       new_item_ids=[new], payment_method_id=gift)
    order, old, new, gift = _gift_card_case(tau_retail, enough=True)
    before = await desk.export()
    out = await desk.json("exchange_delivered_order_items", order_id=order["order_id"], item_ids=[old],
                          new_item_ids=[new], payment_method_id=gift)
    assert same_json(out, upstream_exchange(tau_retail, order, [old], [new], gift))
    assert same_json((await desk.export())["users"], before["users"])  # nothing charged yet


@pytest.mark.parametrize("compat", [True, False])
async def test_item_errors(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "delivered" and any(
        other_variants(tau_retail, it, available=False) and other_variants(tau_retail, it) for it in o["items"]))
    oid, pm = order["order_id"], paid_with(order)
    item = next(it for it in order["items"]
                if other_variants(tau_retail, it, available=False) and other_variants(tau_retail, it))
    unavailable = other_variants(tau_retail, item, available=False)[0]["item_id"]
    available = other_variants(tau_retail, item)[0]["item_id"]
    foreign = next(vid for p in tau_retail["products"].values() if p["product_id"] != item["product_id"]
                   for vid, v in p["variants"].items() if v["available"])
    call = {"order_id": oid, "payment_method_id": pm}

    await desk.refuses(f"Error: {available} not found", "exchange_delivered_order_items", **call,
                       item_ids=[available], new_item_ids=[item["item_id"]])
    await desk.refuses(f"Error: {item['item_id']} not found", "exchange_delivered_order_items", **call,
                       item_ids=[item["item_id"]] * (len(order["items"]) + 1),
                       new_item_ids=[available] * (len(order["items"]) + 1))
    await desk.refuses("Error: the number of items to be exchanged should match", "exchange_delivered_order_items",
                       **call, item_ids=[item["item_id"]], new_item_ids=[])
    for bad in (unavailable, foreign, "1"):
        await desk.refuses(f"Error: new item {bad} not found or available", "exchange_delivered_order_items",
                           **call, item_ids=[item["item_id"]], new_item_ids=[bad])
    for bad_pm in (another_users_method(tau_retail, order["user_id"]), "paypal_0000000"):
        await desk.refuses("Error: payment method not found", "exchange_delivered_order_items", order_id=oid,
                           item_ids=[item["item_id"]], new_item_ids=[available], payment_method_id=bad_pm)


@pytest.mark.parametrize("compat", [True, False])
async def test_only_delivered_orders(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    for status in ("pending", "processed", "cancelled"):
        order = first_order(tau_retail, lambda o, s=status: o["status"] == s)
        it = order["items"][0]["item_id"]
        await desk.refuses("Error: non-delivered order cannot be exchanged", "exchange_delivered_order_items",
                           order_id=order["order_id"], item_ids=[it], new_item_ids=[it],
                           payment_method_id=paid_with(order))
    order = first_order(tau_retail, lambda o: _exchangeable(tau_retail, o, 1))
    item = next(it for it in order["items"] if other_variants(tau_retail, it))
    args = {"order_id": order["order_id"], "item_ids": [item["item_id"]],
            "new_item_ids": [other_variants(tau_retail, item)[0]["item_id"]], "payment_method_id": paid_with(order)}
    await desk.json("exchange_delivered_order_items", **args)
    await desk.refuses("Error: non-delivered order cannot be exchanged", "exchange_delivered_order_items", **args)
    await desk.refuses("Error: non-delivered order cannot be returned", "return_delivered_order_items",
                       order_id=order["order_id"], item_ids=[item["item_id"]], payment_method_id=paid_with(order))
    await desk.refuses("Error: order not found", "exchange_delivered_order_items", **{**args, "order_id": "#w1"})
