"""modify_pending_order_payment: moves a pending order's single payment to another of the
customer's methods (a payment with the new one, a refund to the old one, gift cards debited
and credited at once)."""

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


def upstream_change(order: dict, new_method: str) -> dict:
    expected = copy.deepcopy(order)
    first = expected["payment_history"][0]
    expected["payment_history"] += [
        {"transaction_type": "payment", "amount": first["amount"], "payment_method_id": new_method},
        {"transaction_type": "refund", "amount": first["amount"], "payment_method_id": first["payment_method_id"]},
    ]
    return expected


def _find(data: dict, paid_by: str, switch_to: str, enough: bool = True) -> tuple[dict, str]:
    """A pending order paid by a `paid_by` method whose customer has another `switch_to` method
    (a gift card with enough balance or not, as asked)."""
    for order in data["orders"].values():
        if order["status"] != "pending" or not paid_with(order).startswith(paid_by):
            continue
        amount = order["payment_history"][0]["amount"]
        for pm_id, pm in methods_of(data, order).items():
            if pm_id == paid_with(order) or pm["source"] != switch_to:
                continue
            if switch_to == "gift_card" and (pm["balance"] >= amount) != enough:
                continue
            return copy.deepcopy(order), pm_id
    raise LookupError(f"no pending order paid by {paid_by} with another {switch_to}")


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize(("paid_by", "switch_to"), [("credit_card", "paypal"), ("paypal", "credit_card"),
                                                     ("credit_card", "credit_card")])
async def test_switch_between_cards_and_paypal(store_conn: AsyncConnection, tau_retail: dict, compat: bool,
                                               paid_by: str, switch_to: str) -> None:
    desk = Desk(store_conn, compat=compat)
    order, new_method = _find(tau_retail, paid_by, switch_to)
    before = await desk.export()
    out = await desk.json("modify_pending_order_payment", order_id=order["order_id"], payment_method_id=new_method)
    assert same_json(out, upstream_change(order, new_method))
    after = await desk.export()
    assert same_json(after["orders"][order["order_id"]], out)
    assert same_json(after["users"], before["users"])


@pytest.mark.parametrize("compat", [True, False])
async def test_switch_to_a_gift_card_debits_it(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order, gift = _find(tau_retail, "credit_card", "gift_card", enough=True)
    amount = order["payment_history"][0]["amount"]
    balance = methods_of(tau_retail, order)[gift]["balance"]
    out = await desk.json("modify_pending_order_payment", order_id=order["order_id"], payment_method_id=gift)
    assert same_json(out, upstream_change(order, gift))
    user = await desk.user(order["user_id"])
    assert same_json(user["payment_methods"][gift]["balance"], round(balance - amount, 2))


@pytest.mark.parametrize("compat", [True, False])
async def test_switch_from_a_gift_card_credits_it(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order, card = _find(tau_retail, "gift_card", "credit_card")
    gift, amount = paid_with(order), order["payment_history"][0]["amount"]
    balance = methods_of(tau_retail, order)[gift]["balance"]
    out = await desk.json("modify_pending_order_payment", order_id=order["order_id"], payment_method_id=card)
    assert same_json(out, upstream_change(order, card))
    user = await desk.user(order["user_id"])
    assert same_json(user["payment_methods"][gift]["balance"], round(balance + amount, 2))


@pytest.mark.parametrize("compat", [True, False])
async def test_insufficient_gift_card_balance(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    order, gift = _find(tau_retail, "credit_card", "gift_card", enough=False)
    await Desk(store_conn, compat=compat).refuses(
        "Error: insufficient gift card balance to pay for the order", "modify_pending_order_payment",
        order_id=order["order_id"], payment_method_id=gift)


@pytest.mark.parametrize("compat", [True, False])
async def test_same_method(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    await Desk(store_conn, compat=compat).refuses(
        "Error: the new payment method should be different from the current one", "modify_pending_order_payment",
        order_id=order["order_id"], payment_method_id=paid_with(order))


@pytest.mark.parametrize("compat", [True, False])
async def test_only_one_change(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order, card = _find(tau_retail, "paypal", "credit_card")
    await desk.json("modify_pending_order_payment", order_id=order["order_id"], payment_method_id=card)
    for method in (paid_with(order), card):
        await desk.refuses("Error: there should be exactly one payment for a pending order",
                           "modify_pending_order_payment", order_id=order["order_id"], payment_method_id=method)
    # the method is checked before the history
    await desk.refuses("Error: payment method not found", "modify_pending_order_payment",
                       order_id=order["order_id"], payment_method_id="credit_card_0000000")


@pytest.mark.parametrize("compat", [True, False])
async def test_method_must_be_the_customers(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    for method in (another_users_method(tau_retail, order["user_id"], "credit_card"),
                   another_users_method(tau_retail, order["user_id"], "gift_card"), "paypal_0000000", ""):
        await desk.refuses("Error: payment method not found", "modify_pending_order_payment",
                           order_id=order["order_id"], payment_method_id=method)


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("status", ["processed", "delivered", "cancelled"])
async def test_non_pending_order(store_conn: AsyncConnection, tau_retail: dict, compat: bool, status: str) -> None:
    order = first_order(tau_retail, lambda o: o["status"] == status)
    others = [pm for pm in methods_of(tau_retail, order) if pm != paid_with(order)]
    await Desk(store_conn, compat=compat).refuses(
        "Error: non-pending order cannot be modified", "modify_pending_order_payment",
        order_id=order["order_id"], payment_method_id=(others or [paid_with(order)])[0])


@pytest.mark.parametrize("compat", [True, False])
async def test_unknown_order(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    await Desk(store_conn, compat=compat).refuses("Error: order not found", "modify_pending_order_payment",
                                                  order_id="#W9999999", payment_method_id="paypal_0000000")
