"""cancel_pending_order: pending orders only, two reasons, a refund per payment (gift cards
credited at once); after a payment change upstream refunds every history entry (compat mode)
while the default refunds only what is still paid."""

from __future__ import annotations

import copy

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.engine import make_engine
from backend.store.tau_data import export_store
from tests.backend.tools.retail_harness import (
    Desk,
    first_order,
    methods_of,
    net_paid,
    paid_with,
    same_json,
)

REASONS = ("no longer needed", "ordered by mistake")


def upstream_cancel(order: dict, reason: str) -> dict:
    expected = copy.deepcopy(order)
    refunds = [{"transaction_type": "refund", "amount": p["amount"], "payment_method_id": p["payment_method_id"]}
               for p in expected["payment_history"]]
    expected["status"] = "cancelled"
    expected["cancel_reason"] = reason
    expected["payment_history"].extend(refunds)
    return expected


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("reason", REASONS)
async def test_cancel_card_order(store_conn: AsyncConnection, tau_retail: dict, compat: bool, reason: str) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending" and paid_with(o).startswith("credit_card"))
    before = await desk.export()
    out = await desk.json("cancel_pending_order", order_id=order["order_id"], reason=reason)
    expected = upstream_cancel(order, reason)
    assert same_json(out, expected)
    after = await desk.export()
    assert same_json(after["orders"][order["order_id"]], expected)
    assert same_json(after["users"], before["users"])  # a card refund takes days: no balance changes
    assert same_json({k: v for k, v in after["orders"].items() if k != order["order_id"]},
                     {k: v for k, v in before["orders"].items() if k != order["order_id"]})


@pytest.mark.parametrize("compat", [True, False])
async def test_cancel_gift_card_order_credits_the_card(store_conn: AsyncConnection, tau_retail: dict,
                                                       compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending" and paid_with(o).startswith("gift_card"))
    card = paid_with(order)
    balance = methods_of(tau_retail, order)[card]["balance"]
    amount = order["payment_history"][0]["amount"]
    out = await desk.json("cancel_pending_order", order_id=order["order_id"], reason="ordered by mistake")
    assert same_json(out, upstream_cancel(order, "ordered by mistake"))
    user = await desk.user(order["user_id"])
    assert same_json(user["payment_methods"][card]["balance"], round(balance + amount, 2))


@pytest.mark.parametrize("compat", [True, False])
async def test_unknown_order(store_conn: AsyncConnection, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    await desk.refuses("Error: order not found", "cancel_pending_order", order_id="#W0000000", reason=REASONS[0])
    await desk.refuses("Error: order not found", "cancel_pending_order", order_id="#W0000000", reason="bored")


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("status", ["processed", "delivered", "cancelled"])
async def test_non_pending_order(store_conn: AsyncConnection, tau_retail: dict, compat: bool, status: str) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == status)
    for reason in (REASONS[0], "bored"):  # the status is checked before the reason
        await desk.refuses("Error: non-pending order cannot be cancelled", "cancel_pending_order",
                           order_id=order["order_id"], reason=reason)


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("reason", ["changed my mind", "", "No longer needed", "no longer needed ", "other"])
async def test_invalid_reason(store_conn: AsyncConnection, tau_retail: dict, compat: bool, reason: str) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    await desk.refuses("Error: invalid reason", "cancel_pending_order", order_id=order["order_id"], reason=reason)


@pytest.mark.parametrize("compat", [True, False])
async def test_cancel_twice_and_after_item_change(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    first = first_order(tau_retail, lambda o: o["status"] == "pending")
    await desk.json("cancel_pending_order", order_id=first["order_id"], reason=REASONS[0])
    await desk.refuses("Error: non-pending order cannot be cancelled", "cancel_pending_order",
                       order_id=first["order_id"], reason=REASONS[0])
    second = first_order(tau_retail, lambda o: o["status"] == "pending" and o["order_id"] != first["order_id"])
    item = second["items"][0]["item_id"]
    await desk.json("modify_pending_order_items", order_id=second["order_id"], item_ids=[item],
                    new_item_ids=[item], payment_method_id=paid_with(second))
    await desk.refuses("Error: non-pending order cannot be cancelled", "cancel_pending_order",
                       order_id=second["order_id"], reason=REASONS[1])


def _gift_paid_with_card_too(o: dict, data: dict) -> bool:
    if o["status"] != "pending" or not paid_with(o).startswith("gift_card"):
        return False
    return any(pm["source"] != "gift_card" for pm in methods_of(data, o).values())


@pytest.mark.parametrize("compat", [True, False])
async def test_cancel_after_payment_change(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    """Paid by gift card G, switched to card C (G credited back), then cancelled."""
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: _gift_paid_with_card_too(o, tau_retail))
    oid, gift = order["order_id"], paid_with(order)
    card = next(pm_id for pm_id, pm in methods_of(tau_retail, order).items() if pm["source"] != "gift_card")
    amount = order["payment_history"][0]["amount"]
    original_balance = methods_of(tau_retail, order)[gift]["balance"]

    changed = await desk.json("modify_pending_order_payment", order_id=oid, payment_method_id=card)
    assert [(t["transaction_type"], t["payment_method_id"]) for t in changed["payment_history"]] == [
        ("payment", gift), ("payment", card), ("refund", gift)]
    balance_after_change = (await desk.user(order["user_id"]))["payment_methods"][gift]["balance"]
    assert same_json(balance_after_change, round(original_balance + amount, 2))

    out = await desk.json("cancel_pending_order", order_id=oid, reason="no longer needed")
    stored = await desk.order(oid)
    assert same_json(out, stored) and stored["status"] == "cancelled"
    new_entries = stored["payment_history"][3:]
    balance = (await desk.user(order["user_id"]))["payment_methods"][gift]["balance"]
    if compat:  # upstream: a refund per history entry, earlier refunds included; G credited twice
        assert same_json(new_entries, [
            {"transaction_type": "refund", "amount": amount, "payment_method_id": gift},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": card},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": gift},
        ])
        assert same_json(balance, round(round(balance_after_change + amount, 2) + amount, 2))
    else:  # only what is still paid comes back: the card payment
        assert same_json(new_entries, [{"transaction_type": "refund", "amount": amount, "payment_method_id": card}])
        assert same_json(balance, balance_after_change)
        assert net_paid(stored) == 0


async def test_cancel_is_committed(tau_conn: AsyncConnection, tau_db: str, tau_retail: dict) -> None:
    """Outside a caller's transaction the cancel commits on its own; a failed call commits nothing."""
    desk = Desk(tau_conn)
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    await desk.json("cancel_pending_order", order_id=order["order_id"], reason=REASONS[0])
    await tau_conn.rollback()  # nothing of the tool's work may depend on the caller committing
    res = await desk.result("cancel_pending_order", order_id=order["order_id"], reason=REASONS[0])
    assert not res.ok
    engine = make_engine(tau_db, null_pool=True)
    try:
        async with engine.connect() as other:
            stored = (await export_store(other))["orders"][order["order_id"]]
    finally:
        await engine.dispose()
    assert same_json(stored, upstream_cancel(order, REASONS[0]))
