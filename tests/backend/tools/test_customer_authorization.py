"""A customer conversation sees only its own records: before authenticating only the identity
tools and the generic / catalogue tools work; afterwards another customer's user, orders and
payment methods are refused with `Error: ...` and nothing is written."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.tools.context import Principal
from tests.backend.tools.retail_harness import Desk, first_order, methods_of, paid_with

ADDRESS = {"address1": "1 Elm Park", "address2": "", "city": "Boise", "state": "ID", "country": "USA",
           "zip": "83702"}


def _customer_desk(conn: AsyncConnection, compat: bool = False) -> Desk:
    return Desk(conn, compat=compat, principal=Principal.customer())


def _me_and_other(data: dict) -> tuple[dict, dict]:
    """Pending orders of two different customers."""
    mine = first_order(data, lambda o: o["status"] == "pending" and len(methods_of(data, o)) >= 2)
    theirs = first_order(data, lambda o: o["status"] == "pending" and o["user_id"] != mine["user_id"])
    return mine, theirs


@pytest.mark.parametrize("compat", [True, False])
async def test_before_authentication(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = _customer_desk(store_conn, compat)
    mine, _ = _me_and_other(tau_retail)
    oid, uid = mine["order_id"], mine["user_id"]
    item = mine["items"][0]["item_id"]
    refused = [
        ("get_user_details", {"user_id": uid}),
        ("get_order_details", {"order_id": oid}),
        ("cancel_pending_order", {"order_id": oid, "reason": "no longer needed"}),
        ("modify_pending_order_address", {"order_id": oid, **ADDRESS}),
        ("modify_pending_order_payment", {"order_id": oid, "payment_method_id": paid_with(mine)}),
        ("modify_pending_order_items", {"order_id": oid, "item_ids": [item], "new_item_ids": [item],
                                        "payment_method_id": paid_with(mine)}),
        ("modify_user_address", {"user_id": uid, **ADDRESS}),
        ("return_delivered_order_items", {"order_id": oid, "item_ids": [item], "payment_method_id": paid_with(mine)}),
        ("exchange_delivered_order_items", {"order_id": oid, "item_ids": [item], "new_item_ids": [item],
                                            "payment_method_id": paid_with(mine)}),
    ]
    for name, args in refused:
        res = await desk.result(name, args)
        assert res.output.startswith("Error: ") and res.denied, (name, res.output)
    await desk.refuses(None, "cancel_pending_order", order_id=oid, reason="no longer needed")
    assert desk.ctx.principal.user_id is None

    product_id = next(iter(tau_retail["products"]))
    allowed = [
        ("list_all_product_types", {}),
        ("get_product_details", {"product_id": product_id}),
        ("calculate", {"expression": "1 + 1"}),
        ("think", {"thought": "hmm"}),
        ("transfer_to_human_agents", {"summary": "wants a human"}),
    ]
    for name, args in allowed:
        res = await desk.result(name, args)
        assert res.ok and not res.denied, (name, res.output)
    assert desk.ctx.principal.user_id is None


@pytest.mark.parametrize("compat", [True, False])
async def test_a_failed_lookup_does_not_authenticate(store_conn: AsyncConnection, tau_retail: dict,
                                                     compat: bool) -> None:
    desk = _customer_desk(store_conn, compat)
    assert await desk.text("find_user_id_by_email", email="nobody@example.com") == "Error: user not found"
    assert await desk.text("find_user_id_by_name_zip", first_name="No", last_name="Body", zip="00000") == (
        "Error: user not found")
    assert desk.ctx.principal.user_id is None
    uid = next(iter(tau_retail["users"]))
    assert (await desk.result("get_user_details", user_id=uid)).denied


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("how", ["email", "name_zip"])
async def test_after_authentication(store_conn: AsyncConnection, tau_retail: dict, compat: bool, how: str) -> None:
    desk = _customer_desk(store_conn, compat)
    mine, theirs = _me_and_other(tau_retail)
    me = tau_retail["users"][mine["user_id"]]
    if how == "email":
        assert await desk.text("find_user_id_by_email", email=me["email"]) == mine["user_id"]
    else:
        assert await desk.text("find_user_id_by_name_zip", first_name=me["name"]["first_name"],
                               last_name=me["name"]["last_name"], zip=me["address"]["zip"]) == mine["user_id"]
    assert desk.ctx.principal.user_id == mine["user_id"]

    # my own records work
    assert (await desk.json("get_user_details", user_id=mine["user_id"]))["email"] == me["email"]
    assert (await desk.json("get_order_details", order_id=mine["order_id"]))["order_id"] == mine["order_id"]

    # another customer's records are refused, and nothing is written
    their_item = theirs["items"][0]["item_id"]
    their_method = paid_with(theirs)
    for name, args in [
        ("get_user_details", {"user_id": theirs["user_id"]}),
        ("get_order_details", {"order_id": theirs["order_id"]}),
        ("cancel_pending_order", {"order_id": theirs["order_id"], "reason": "no longer needed"}),
        ("modify_pending_order_address", {"order_id": theirs["order_id"], **ADDRESS}),
        ("modify_user_address", {"user_id": theirs["user_id"], **ADDRESS}),
        ("modify_pending_order_payment", {"order_id": theirs["order_id"], "payment_method_id": their_method}),
        ("modify_pending_order_items", {"order_id": theirs["order_id"], "item_ids": [their_item],
                                        "new_item_ids": [their_item], "payment_method_id": their_method}),
    ]:
        await desk.refuses(None, name, **args)

    # their payment method on my order is refused too
    for name, args in [
        ("modify_pending_order_payment", {"order_id": mine["order_id"], "payment_method_id": their_method}),
        ("modify_pending_order_items", {"order_id": mine["order_id"], "item_ids": [], "new_item_ids": [],
                                        "payment_method_id": their_method}),
    ]:
        await desk.refuses(None, name, **args)

    # a different customer cannot take over this conversation
    them = tau_retail["users"][theirs["user_id"]]
    out = await desk.text("find_user_id_by_email", email=them["email"])
    assert out.startswith("Error: ")
    assert desk.ctx.principal.user_id == mine["user_id"]
    assert (await desk.result("get_user_details", user_id=theirs["user_id"])).denied

    # and my own writes still work
    other_method = next(pm for pm in methods_of(tau_retail, mine) if pm != paid_with(mine))
    res = await desk.result("modify_pending_order_payment", order_id=mine["order_id"],
                            payment_method_id=other_method)
    assert res.ok or res.output == "Error: insufficient gift card balance to pay for the order", res.output
    assert (await desk.json("cancel_pending_order", order_id=mine["order_id"],
                            reason="ordered by mistake"))["status"] == "cancelled"


async def test_denials_are_reported(store_conn: AsyncConnection, tau_retail: dict) -> None:
    desk = _customer_desk(store_conn)
    seen = []

    async def hook(call) -> None:
        seen.append((call.tool, call.principal_user_id))

    desk.ctx.on_denied.append(hook)
    mine, theirs = _me_and_other(tau_retail)
    await desk.text("find_user_id_by_email", email=tau_retail["users"][mine["user_id"]]["email"])
    await desk.refuses(None, "get_order_details", order_id=theirs["order_id"])
    assert seen == [("get_order_details", mine["user_id"])]


@pytest.mark.parametrize("compat", [True, False])
async def test_another_customers_record_is_answered_like_a_missing_one(store_conn: AsyncConnection,
                                                                      tau_retail: dict, compat: bool) -> None:
    """A conversation cannot learn which order or user ids exist: another customer's record gets
    the same words as a missing one; only the audit reason says what happened."""
    desk = _customer_desk(store_conn, compat)
    seen = []

    async def hook(call) -> None:
        seen.append((call.tool, call.reason))

    desk.ctx.on_denied.append(hook)
    mine, theirs = _me_and_other(tau_retail)
    await desk.text("find_user_id_by_email", email=tau_retail["users"][mine["user_id"]]["email"])
    item = theirs["items"][0]["item_id"]
    for name, args, missing_args in [
        ("get_order_details", {"order_id": theirs["order_id"]}, {"order_id": "#W0000000"}),
        ("cancel_pending_order", {"order_id": theirs["order_id"], "reason": "no longer needed"},
         {"order_id": "#W0000000", "reason": "no longer needed"}),
        ("modify_pending_order_items", {"order_id": theirs["order_id"], "item_ids": [item], "new_item_ids": [item],
                                        "payment_method_id": paid_with(theirs)},
         {"order_id": "#W0000000", "item_ids": [item], "new_item_ids": [item],
          "payment_method_id": paid_with(theirs)}),
        ("get_user_details", {"user_id": theirs["user_id"]}, {"user_id": "nobody_0000"}),
        ("modify_user_address", {"user_id": theirs["user_id"], **ADDRESS}, {"user_id": "nobody_0000", **ADDRESS}),
    ]:
        seen.clear()
        other = await desk.refuses(None, name, **args)
        assert [tool for tool, _ in seen] == [name]  # the attempt on someone else's record is audited
        assert "does not belong to the authenticated customer" in seen[0][1]
        missing = await desk.refuses(None, name, **missing_args)
        assert other == missing, name
        assert "belong" not in other
