"""get_order_details: the order record as JSON, `Error: order not found` otherwise."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk, is_ascii, same_json


@pytest.mark.parametrize("compat", [True, False])
async def test_returns_the_record_in_every_status(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    seen = set()
    for order_id, order in tau_retail["orders"].items():
        if order["status"] in seen:
            continue
        seen.add(order["status"])
        out = await desk.text("get_order_details", order_id=order_id)
        assert is_ascii(out)
        assert same_json(json.loads(out), order)
    assert seen == {"pending", "processed", "delivered", "cancelled"}


@pytest.mark.parametrize("compat", [True, False])
async def test_order_id_must_match_exactly(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    order_id = next(iter(tau_retail["orders"]))
    for wrong in (order_id[1:], order_id.lower(), order_id + " ", "", "#W0000000"):
        await desk.refuses("Error: order not found", "get_order_details", order_id=wrong)
