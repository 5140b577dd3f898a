"""modify_pending_order_address: replaces a pending order's shipping address, nothing else."""

from __future__ import annotations

import copy

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk, first_order, is_ascii, same_json

NEW_ADDRESS = {"address1": "12 Quarry Road", "address2": "Apt 3", "city": "Madison", "state": "WI",
               "country": "USA", "zip": "53703"}


@pytest.mark.parametrize("compat", [True, False])
async def test_changes_the_address(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    before = await desk.export()
    out = await desk.json("modify_pending_order_address", order_id=order["order_id"], **NEW_ADDRESS)
    expected = copy.deepcopy(order)
    expected["address"] = dict(NEW_ADDRESS)
    assert same_json(out, expected)
    after = await desk.export()
    assert same_json(after["orders"][order["order_id"]], expected)
    assert same_json(after["users"], before["users"])  # the customer's own address is untouched
    if compat:  # upstream writes the keys in its own order: state before country
        assert list(out["address"]) == ["address1", "address2", "city", "state", "country", "zip"]


@pytest.mark.parametrize("compat", [True, False])
async def test_any_text_is_accepted_and_escaped(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    address = {"address1": "Rue de l'Église 5", "address2": "", "city": "Zürich", "state": "",
               "country": "Switzerland", "zip": "8001"}
    res = await desk.result("modify_pending_order_address", order_id=order["order_id"], **address)
    assert res.ok and is_ascii(res.output) and "\\u00fc" in res.output
    assert same_json((await desk.order(order["order_id"]))["address"], address)


@pytest.mark.parametrize("compat", [True, False])
async def test_can_be_changed_again(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    await desk.json("modify_pending_order_address", order_id=order["order_id"], **NEW_ADDRESS)
    out = await desk.json("modify_pending_order_address", order_id=order["order_id"], **order["address"])
    assert same_json(out, order)


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("status", ["processed", "delivered", "cancelled"])
async def test_non_pending_order(store_conn: AsyncConnection, tau_retail: dict, compat: bool, status: str) -> None:
    desk = Desk(store_conn, compat=compat)
    order = first_order(tau_retail, lambda o: o["status"] == status)
    await desk.refuses("Error: non-pending order cannot be modified", "modify_pending_order_address",
                       order_id=order["order_id"], **NEW_ADDRESS)


@pytest.mark.parametrize("compat", [True, False])
async def test_unknown_order(store_conn: AsyncConnection, compat: bool) -> None:
    await Desk(store_conn, compat=compat).refuses("Error: order not found", "modify_pending_order_address",
                                                  order_id="W0000000", **NEW_ADDRESS)


@pytest.mark.parametrize("compat", [True, False])
async def test_missing_field(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    order = first_order(tau_retail, lambda o: o["status"] == "pending")
    partial = {k: v for k, v in NEW_ADDRESS.items() if k != "zip"}
    out = await Desk(store_conn, compat=compat).refuses(None, "modify_pending_order_address",
                                                        order_id=order["order_id"], **partial)
    if compat:
        assert out == "Error: ModifyPendingOrderAddress.invoke() missing 1 required positional argument: 'zip'"
