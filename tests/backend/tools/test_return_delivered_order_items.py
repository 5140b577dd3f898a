"""return_delivered_order_items: delivered orders only; refund to the original method or a
gift card; sets `return requested`, the sorted items and the refund method; no money moves yet."""

from __future__ import annotations

import copy

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import (
    Desk,
    another_users_method,
    first_order,
    methods_of,
    paid_with,
    same_json,
)


def upstream_return(order: dict, item_ids: list[str], method: str) -> dict:
    expected = copy.deepcopy(order)
    expected["status"] = "return requested"
    expected["return_items"] = sorted(item_ids)
    expected["return_payment_method_id"] = method
    return expected


def _delivered_with_gift_card(data: dict) -> tuple[dict, str]:
    for order in data["orders"].values():
        if order["status"] == "delivered" and len(order["items"]) >= 3 and not paid_with(order).startswith("gift"):
            gifts = [pm for pm, v in methods_of(data, order).items() if v["source"] == "gift_card"]
            if gifts:
                return copy.deepcopy(order), gifts[0]
    raise LookupError


@pytest.mark.parametrize("compat", [True, False])
async def test_return_to_the_original_method(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "delivered" and len(o["items"]) >= 3)
    items = [order["items"][2]["item_id"], order["items"][0]["item_id"]]
    before = await desk.export()
    out = await desk.json("return_delivered_order_items", order_id=order["order_id"], item_ids=items,
                          payment_method_id=paid_with(order))
    expected = upstream_return(order, items, paid_with(order))
    assert same_json(out, expected)
    after = await desk.export()
    assert same_json(after["orders"][order["order_id"]], expected)
    assert same_json(after["users"], before["users"])


@pytest.mark.parametrize("compat", [True, False])
async def test_return_to_a_gift_card(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order, gift = _delivered_with_gift_card(tau_retail)
    items = [it["item_id"] for it in order["items"]]
    before = await desk.export()
    out = await desk.json("return_delivered_order_items", order_id=order["order_id"], item_ids=items,
                          payment_method_id=gift)
    assert same_json(out, upstream_return(order, items, gift))
    assert same_json((await desk.export())["users"], before["users"])  # the refund comes later


@pytest.mark.parametrize("compat", [True, False])
async def test_duplicate_items(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)

    def duplicated(o: dict) -> bool:
        ids = [it["item_id"] for it in o["items"]]
        return o["status"] == "delivered" and len(set(ids)) < len(ids)

    order = first_order(tau_retail, duplicated)
    ids = [it["item_id"] for it in order["items"]]
    twice = next(i for i in ids if ids.count(i) == 2)
    await desk.refuses("Error: some item not found", "return_delivered_order_items", order_id=order["order_id"],
                       item_ids=[twice] * 3, payment_method_id=paid_with(order))
    out = await desk.json("return_delivered_order_items", order_id=order["order_id"], item_ids=[twice, twice],
                          payment_method_id=paid_with(order))
    assert same_json(out, upstream_return(order, [twice, twice], paid_with(order)))


async def test_empty_return_is_accepted_upstream(store_conn: AsyncConnection, tau_retail: dict) -> None:
    desk = Desk(store_conn, compat=True)
    order = first_order(tau_retail, lambda o: o["status"] == "delivered")
    out = await desk.json("return_delivered_order_items", order_id=order["order_id"], item_ids=[],
                          payment_method_id=paid_with(order))
    assert same_json(out, upstream_return(order, [], paid_with(order)))


@pytest.mark.parametrize("compat", [True, False])
async def test_refund_method_rules(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)

    def has_other_non_gift(o: dict) -> bool:
        return o["status"] == "delivered" and any(
            pm != paid_with(o) and v["source"] != "gift_card" for pm, v in methods_of(tau_retail, o).items())

    order = first_order(tau_retail, has_other_non_gift)
    other = next(pm for pm, v in methods_of(tau_retail, order).items()
                 if pm != paid_with(order) and v["source"] != "gift_card")
    item = [order["items"][0]["item_id"]]
    await desk.refuses("Error: payment method should be either the original payment method or a gift card",
                       "return_delivered_order_items", order_id=order["order_id"], item_ids=item,
                       payment_method_id=other)
    for foreign in (another_users_method(tau_retail, order["user_id"], "gift_card"), "credit_card_0000000"):
        await desk.refuses("Error: payment method not found", "return_delivered_order_items",
                           order_id=order["order_id"], item_ids=item, payment_method_id=foreign)
    # the method is checked before the items
    await desk.refuses("Error: payment method not found", "return_delivered_order_items",
                       order_id=order["order_id"], item_ids=["0000000000"], payment_method_id="paypal_0000000")


@pytest.mark.parametrize("compat", [True, False])
async def test_item_not_in_order(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "delivered")
    other_item = first_order(tau_retail, lambda o: o["order_id"] != order["order_id"] and not (
        {i["item_id"] for i in o["items"]} & {i["item_id"] for i in order["items"]}))["items"][0]["item_id"]
    for items in ([other_item], [order["items"][0]["item_id"], other_item], [""]):
        await desk.refuses("Error: some item not found", "return_delivered_order_items", order_id=order["order_id"],
                           item_ids=items, payment_method_id=paid_with(order))


@pytest.mark.parametrize("compat", [True, False])
async def test_only_delivered_orders(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    for status in ("pending", "processed", "cancelled"):
        order = first_order(tau_retail, lambda o, s=status: o["status"] == s)
        await desk.refuses("Error: non-delivered order cannot be returned", "return_delivered_order_items",
                           order_id=order["order_id"], item_ids=[order["items"][0]["item_id"]],
                           payment_method_id=paid_with(order))
    order = first_order(tau_retail, lambda o: o["status"] == "delivered")
    item = [order["items"][0]["item_id"]]
    await desk.json("return_delivered_order_items", order_id=order["order_id"], item_ids=item,
                    payment_method_id=paid_with(order))
    await desk.refuses("Error: non-delivered order cannot be returned", "return_delivered_order_items",
                       order_id=order["order_id"], item_ids=item, payment_method_id=paid_with(order))
    await desk.refuses("Error: order not found", "return_delivered_order_items", order_id="#W0000001",
                       item_ids=item, payment_method_id=paid_with(order))
