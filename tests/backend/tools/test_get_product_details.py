"""get_product_details: the product with its variants as JSON, `Error: product not found` otherwise."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk, same_json


@pytest.mark.parametrize("compat", [True, False])
async def test_returns_the_product(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    for product_id, product in list(tau_retail["products"].items())[::7]:
        shown = json.loads(await desk.text("get_product_details", product_id=product_id))
        assert same_json(shown, product)
        assert list(shown["variants"]) == list(product["variants"])


@pytest.mark.parametrize("compat", [True, False])
async def test_unknown_product(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    product = next(iter(tau_retail["products"].values()))
    an_item_id = next(iter(product["variants"]))  # a variant id is not a product id
    for wrong in ("0000000000", "", an_item_id, product["name"]):
        await desk.refuses("Error: product not found", "get_product_details", product_id=wrong)
