"""modify_pending_order_items: swaps items of a pending order for other available variants
of the same product, paying or refunding the price difference (once per order). Upstream
records the float difference unrounded and a 0 refund when nothing changes in price; the
default mode keeps money exact to the cent."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import (
    Desk,
    another_users_method,
    cents,
    first_order,
    is_cent_exact,
    items_total,
    methods_of,
    net_paid,
    other_variants,
    paid_with,
    same_json,
)


def upstream_modify(data: dict, order: dict, item_ids: list[str], new_ids: list[str], method: str) -> dict:
    """The order as tau-bench leaves it (float arithmetic in its order of operations)."""
    expected = copy.deepcopy(order)
    diff = 0
    for old, new in zip(item_ids, new_ids, strict=True):
        item = [it for it in expected["items"] if it["item_id"] == old][0]
        diff += data["products"][item["product_id"]]["variants"][new]["price"] - item["price"]
    expected["payment_history"].append(
        {"transaction_type": "payment" if diff > 0 else "refund", "amount": abs(diff), "payment_method_id": method})
    for old, new in zip(item_ids, new_ids, strict=True):
        item = [it for it in expected["items"] if it["item_id"] == old][0]
        variant = data["products"][item["product_id"]]["variants"][new]
        item.update(item_id=new, price=variant["price"], options=variant["options"])
    expected["status"] = "pending (item modified)"
    return expected


def available_item(data: dict, order: dict) -> str:
    """The first item of an order whose variant is still available (so it can be swapped for itself)."""
    return next(it["item_id"] for it in order["items"]
                if data["products"][it["product_id"]]["variants"][it["item_id"]]["available"])


def unrounded_swap(data: dict) -> tuple[dict, str, str]:
    """A pending order, one of its items and an available variant whose float difference is unrounded."""
    for order in data["orders"].values():
        if order["status"] != "pending" or not paid_with(order).startswith("credit_card"):
            continue
        for item in order["items"]:
            for v in other_variants(data, item):
                diff = 0 + (v["price"] - item["price"])
                if diff > 0 and not is_cent_exact(abs(diff)):
                    return copy.deepcopy(order), item["item_id"], v["item_id"]
    raise LookupError("no unrounded swap")


@pytest.mark.parametrize("compat", [True, False])
async def test_swap_with_unrounded_difference(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order, old, new = unrounded_swap(tau_retail)
    method = paid_with(order)
    out = await desk.json("modify_pending_order_items", order_id=order["order_id"], item_ids=[old],
                          new_item_ids=[new], payment_method_id=method)
    expected = upstream_modify(tau_retail, order, [old], [new], method)
    stored = await desk.order(order["order_id"])
    assert same_json(out, stored)
    if compat:
        assert same_json(out, expected)  # e.g. 70.98000000000002, exactly as upstream
        assert out["payment_history"][-1]["amount"] == expected["payment_history"][-1]["amount"]
    else:
        assert same_json(out["items"], expected["items"]) and out["status"] == "pending (item modified)"
        last = out["payment_history"][-1]
        assert last["transaction_type"] == "payment" and last["payment_method_id"] == method
        assert cents(last["amount"]) == cents(round(expected["payment_history"][-1]["amount"], 2))
        assert all(is_cent_exact(t["amount"]) for t in out["payment_history"])
        assert net_paid(stored) == items_total(stored)


@pytest.mark.parametrize("compat", [True, False])
async def test_cheaper_items_are_refunded(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending" and len(o["items"]) >= 2
                        and all(other_variants(tau_retail, it) for it in o["items"][:2]))
    olds = [it["item_id"] for it in order["items"][:2]]
    news = [min(other_variants(tau_retail, it), key=lambda v: v["price"])["item_id"] for it in order["items"][:2]]
    expected = upstream_modify(tau_retail, order, olds, news, paid_with(order))
    out = await desk.json("modify_pending_order_items", order_id=order["order_id"], item_ids=olds,
                          new_item_ids=news, payment_method_id=paid_with(order))
    assert same_json(out["items"], expected["items"])
    assert out["payment_history"][-1]["transaction_type"] == expected["payment_history"][-1]["transaction_type"]
    if compat:
        assert same_json(out, expected)
    else:
        assert net_paid(await desk.order(order["order_id"])) == items_total(out)


@pytest.mark.parametrize("compat", [True, False])
async def test_same_variant_swap(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    """Swapping an item for the very same variant is accepted; upstream records a 0 refund."""
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending" and not paid_with(o).startswith("gift"))
    item = available_item(tau_retail, order)
    out = await desk.json("modify_pending_order_items", order_id=order["order_id"], item_ids=[item],
                          new_item_ids=[item], payment_method_id=paid_with(order))
    assert out["status"] == "pending (item modified)" and same_json(out["items"], order["items"])
    if compat:
        assert same_json(out, upstream_modify(tau_retail, order, [item], [item], paid_with(order)))
        assert same_json(out["payment_history"][-1],
                         {"transaction_type": "refund", "amount": 0.0, "payment_method_id": paid_with(order)})
    else:
        assert net_paid(out) == items_total(out)
        assert all(cents(t["amount"]) > 0 for t in out["payment_history"]), "no zero-amount transactions"


async def test_empty_lists_are_accepted_upstream(store_conn: AsyncConnection, tau_retail: dict) -> None:
    desk = Desk(store_conn, compat=True)
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    out = await desk.json("modify_pending_order_items", order_id=order["order_id"], item_ids=[], new_item_ids=[],
                          payment_method_id=paid_with(order))
    assert same_json(out, upstream_modify(tau_retail, order, [], [], paid_with(order)))


@pytest.mark.parametrize("compat", [True, False])
async def test_duplicate_items_are_swapped_one_by_one(store_conn: AsyncConnection, tau_retail: dict,
                                                      compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)

    def duplicated(o: dict) -> bool:
        ids = [it["item_id"] for it in o["items"]]
        return o["status"] == "pending" and len(set(ids)) < len(ids)

    order = first_order(tau_retail, duplicated)
    ids = [it["item_id"] for it in order["items"]]
    twice = next(i for i in ids if ids.count(i) > 1)
    item = next(it for it in order["items"] if it["item_id"] == twice)
    replacements = [v["item_id"] for v in other_variants(tau_retail, item)[:2]]
    expected = upstream_modify(tau_retail, order, [twice, twice], replacements, paid_with(order))
    await desk.refuses(f"Error: {twice} not found", "modify_pending_order_items", order_id=order["order_id"],
                       item_ids=[twice] * 3, new_item_ids=replacements + replacements[:1],
                       payment_method_id=paid_with(order))
    out = await desk.json("modify_pending_order_items", order_id=order["order_id"], item_ids=[twice, twice],
                          new_item_ids=replacements, payment_method_id=paid_with(order))
    assert same_json(out["items"], expected["items"])
    if compat:
        assert same_json(out, expected)


def _gift_card_case(data: dict, enough: bool) -> tuple[dict, str, str, str]:
    for order in data["orders"].values():
        if order["status"] != "pending":
            continue
        gifts = [pm for pm in methods_of(data, order).values() if pm["source"] == "gift_card"]
        for item in order["items"]:
            for v in other_variants(data, item):
                diff = v["price"] - item["price"]
                for gift in gifts:
                    if diff > 0 and (gift["balance"] >= diff) == enough and abs(gift["balance"] - diff) > 0.01:
                        return copy.deepcopy(order), item["item_id"], v["item_id"], gift["id"]
    raise LookupError("no gift card case")


@pytest.mark.parametrize("compat", [True, False])
async def test_gift_card_pays_the_difference(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order, old, new, gift = _gift_card_case(tau_retail, enough=True)
    balance = methods_of(tau_retail, order)[gift]["balance"]
    expected = upstream_modify(tau_retail, order, [old], [new], gift)
    diff = expected["payment_history"][-1]["amount"]
    out = await desk.json("modify_pending_order_items", order_id=order["order_id"], item_ids=[old],
                          new_item_ids=[new], payment_method_id=gift)
    new_balance = (await desk.user(order["user_id"]))["payment_methods"][gift]["balance"]
    assert same_json(new_balance, round(balance - diff, 2))
    if compat:
        assert same_json(out, expected)
    else:
        assert cents(new_balance) == cents(balance) - cents(round(diff, 2))


@pytest.mark.parametrize("compat", [True, False])
async def test_insufficient_gift_card_balance(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    order, old, new, gift = _gift_card_case(tau_retail, enough=False)
    await Desk(store_conn, compat=compat).refuses(
        "Error: insufficient gift card balance to pay for the new item", "modify_pending_order_items",
        order_id=order["order_id"], item_ids=[old], new_item_ids=[new], payment_method_id=gift)


@pytest.mark.parametrize("compat", [True, False])
async def test_item_errors(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending" and any(
        other_variants(tau_retail, it, available=False) for it in o["items"]))
    oid, pm = order["order_id"], paid_with(order)
    item = next(it for it in order["items"] if other_variants(tau_retail, it, available=False))
    unavailable = other_variants(tau_retail, item, available=False)[0]["item_id"]
    available = other_variants(tau_retail, item)[0]["item_id"]
    foreign = next(vid for p in tau_retail["products"].values() if p["product_id"] != item["product_id"]
                   for vid, v in p["variants"].items() if v["available"])
    not_in_order = next(vid for vid in tau_retail["products"][item["product_id"]]["variants"]
                        if vid not in {it["item_id"] for it in order["items"]})

    await desk.refuses(f"Error: {not_in_order} not found", "modify_pending_order_items", order_id=oid,
                       item_ids=[not_in_order], new_item_ids=[available], payment_method_id=pm)
    await desk.refuses("Error: the number of items to be exchanged should match", "modify_pending_order_items",
                       order_id=oid, item_ids=[item["item_id"]], new_item_ids=[available, available],
                       payment_method_id=pm)
    await desk.refuses("Error: the number of items to be exchanged should match", "modify_pending_order_items",
                       order_id=oid, item_ids=[item["item_id"]], new_item_ids=[], payment_method_id=pm)
    for bad in (unavailable, foreign, "0000000000"):
        await desk.refuses(f"Error: new item {bad} not found or available", "modify_pending_order_items",
                           order_id=oid, item_ids=[item["item_id"]], new_item_ids=[bad], payment_method_id=pm)
    for bad_pm in (another_users_method(tau_retail, order["user_id"]), "gift_card_0000000"):
        await desk.refuses("Error: payment method not found", "modify_pending_order_items", order_id=oid,
                           item_ids=[item["item_id"]], new_item_ids=[available], payment_method_id=bad_pm)


@pytest.mark.parametrize("compat", [True, False])
async def test_only_once_and_only_pending(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    item = available_item(tau_retail, order)
    await desk.json("modify_pending_order_items", order_id=order["order_id"], item_ids=[item], new_item_ids=[item],
                    payment_method_id=paid_with(order))
    await desk.refuses("Error: non-pending order cannot be modified", "modify_pending_order_items",
                       order_id=order["order_id"], item_ids=[item], new_item_ids=[item],
                       payment_method_id=paid_with(order))
    for status in ("processed", "delivered", "cancelled"):
        other = first_order(tau_retail, lambda o, s=status: o["status"] == s)
        it = other["items"][0]["item_id"]
        await desk.refuses("Error: non-pending order cannot be modified", "modify_pending_order_items",
                           order_id=other["order_id"], item_ids=[it], new_item_ids=[it],
                           payment_method_id=paid_with(other))
    await desk.refuses("Error: order not found", "modify_pending_order_items", order_id="#W123",
                       item_ids=[item], new_item_ids=[item], payment_method_id=paid_with(order))


async def test_default_mode_money_stays_exact_over_many_swaps(store_conn: AsyncConnection, tau_retail: dict) -> None:
    """Forty pending orders, each with an item swapped for another variant, stay exact to the cent."""
    desk = Desk(store_conn)
    checked = 0
    for order in list(tau_retail["orders"].values())[:200]:
        if order["status"] != "pending" or paid_with(order).startswith("gift_card"):
            continue
        item = next((it for it in order["items"] if other_variants(tau_retail, it)), None)
        if item is None:
            continue
        new = other_variants(tau_retail, item)[-1]["item_id"]
        out = await desk.json("modify_pending_order_items", order_id=order["order_id"], item_ids=[item["item_id"]],
                              new_item_ids=[new], payment_method_id=paid_with(order))
        assert all(is_cent_exact(t["amount"]) for t in out["payment_history"])
        assert net_paid(out) == items_total(out) == sum(Decimal(repr(i["price"])) for i in out["items"])
        checked += 1
        if checked == 40:
            break
    assert checked == 40
