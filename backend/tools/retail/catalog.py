"""Catalogue tools: list product types and read a product with its variants. They hold no
customer data, so they work before a conversation is authenticated."""

from __future__ import annotations

import json

from sqlalchemy import text

from backend.store.records import dumps, fetch_product
from backend.tools.context import ToolContext, ToolError
from backend.tools.registry import ToolKind, tool


@tool(ToolKind.READ, customer_data=False)
async def get_product_details(ctx: ToolContext, product_id: str) -> str:
    """Get a product type and all its variants (item ids, options, availability, price).

    Args:
        product_id: The product id, such as '6086499569'. A product id is not an item id.
    """
    product = await fetch_product(ctx.conn, product_id)
    if product is None:
        raise ToolError("product not found")
    return dumps(product)


@tool(ToolKind.READ, customer_data=False)
async def list_all_product_types(ctx: ToolContext) -> str:
    """List every product type in the store as a JSON object of product name to product id,
    sorted by name. Each product type has several variants, each with its own item id and
    options."""
    rows = await ctx.conn.execute(text("SELECT name, id FROM products ORDER BY seq"))
    by_name: dict[str, str] = {}
    for name, pid in rows:
        by_name[name] = pid
    return json.dumps(dict(sorted(by_name.items())))
