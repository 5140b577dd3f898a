"""list_all_product_types: `{name: product_id}` of every product, sorted by name."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk


@pytest.mark.parametrize("compat", [True, False])
async def test_lists_every_product_sorted_by_name(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    expected = dict(sorted((p["name"], pid) for pid, p in tau_retail["products"].items()))
    out = await desk.text("list_all_product_types")
    assert out == json.dumps(expected)
    assert len(json.loads(out)) == 50


@pytest.mark.parametrize("compat", [True, False])
async def test_takes_no_arguments(store_conn: AsyncConnection, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    out = await desk.refuses(None, "list_all_product_types", category="shoes")
    if compat:
        assert out == "Error: ListAllProductTypes.invoke() got an unexpected keyword argument 'category'"
