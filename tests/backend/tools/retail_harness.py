"""Helpers for the per-tool tests of the retail tools (imported as `retail_harness`).

`Desk` calls tools through the one registry entry point (`RETAIL.call`) on a connection to
a private copy of the tau retail store, as staff or as a customer, in upstream-compatible
or default mode, and reads the store back (`export`, `fingerprint`). The other helpers pick
records out of the tau data (`tau_retail`, never mutated) and compare JSON by value.
Expectations in the tests come from tau-bench's documented behaviour, not from our code.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

import backend.tools.retail  # noqa: F401  (registers the 16 tools)
from backend.store.tau_data import STORE_TABLES_IN_DELETE_ORDER, export_store
from backend.tools.context import Principal, ToolContext
from backend.tools.registry import RETAIL, ToolResult

Record = dict[str, Any]


class Desk:
    """A conversation's tool desk: calls tools and inspects the store it works on."""

    def __init__(self, conn: AsyncConnection, *, compat: bool = False, principal: Principal | None = None) -> None:
        self.conn = conn
        self.ctx = ToolContext(conn, principal or Principal.staff(), upstream_compat=compat)

    async def result(self, name: str, arguments: Any = None, /, **kwargs: Any) -> ToolResult:
        args = kwargs if arguments is None else arguments
        res = await RETAIL.call(self.ctx, name, args)
        assert isinstance(res.output, str)
        return res

    async def text(self, name: str, /, **kwargs: Any) -> str:
        return (await self.result(name, **kwargs)).output

    async def json(self, name: str, /, **kwargs: Any) -> Any:
        out = await self.text(name, **kwargs)
        assert not out.startswith("Error"), out
        return json.loads(out)

    async def export(self) -> dict[str, dict[str, Record]]:
        return await export_store(self.conn)

    async def order(self, order_id: str) -> Record:
        return (await self.export())["orders"][order_id]

    async def user(self, user_id: str) -> Record:
        return (await self.export())["users"][user_id]

    async def fingerprint(self) -> str:
        """A digest of every store row: equal before and after iff nothing was written."""
        per_table = ", ".join(
            f"(SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {table} t)"
            for table in sorted(STORE_TABLES_IN_DELETE_ORDER)
        )
        return await self.conn.scalar(text(f"SELECT concat_ws(';', {per_table})"))

    async def refuses(self, expected: str | None, name: str, /, **kwargs: Any) -> str:
        """Call a tool that must fail: `Error: ...` (exactly `expected` when given), nothing written."""
        before = await self.fingerprint()
        res = await self.result(name, **kwargs)
        assert not res.ok, res.output
        if expected is None:
            assert res.output.startswith("Error: "), res.output
        else:
            assert res.output == expected
        assert await self.fingerprint() == before, f"{name} failed but wrote to the store"
        return res.output


def canonical(value: Any) -> Any:
    """JSON value with numbers compared by value (60 == 60.0), never confused with booleans."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return ("number", Decimal(repr(value)))
    if isinstance(value, int | Decimal):
        return ("number", Decimal(value))
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    raise TypeError(f"not JSON: {value!r}")


def same_json(a: Any, b: Any) -> bool:
    return canonical(a) == canonical(b)


def cents(amount: Any) -> Decimal:
    return Decimal(repr(amount)) if isinstance(amount, float) else Decimal(amount)


def is_cent_exact(amount: Any) -> bool:
    d = cents(amount)
    return d == d.quantize(Decimal("0.01"))


def net_paid(order: Record) -> Decimal:
    """Payments minus refunds of an order, exactly."""
    return sum(
        (cents(t["amount"]) * (1 if t["transaction_type"] == "payment" else -1) for t in order["payment_history"]),
        Decimal(0),
    )


def items_total(order: Record) -> Decimal:
    return sum((cents(it["price"]) for it in order["items"]), Decimal(0))


def first_order(data: dict, predicate: Callable[[Record], bool]) -> Record:
    """A deep copy of the first order (in data order) that satisfies `predicate`."""
    for order in data["orders"].values():
        if predicate(order):
            return copy.deepcopy(order)
    raise LookupError("no order in the tau data satisfies the predicate")


def methods_of(data: dict, order: Record) -> dict[str, Record]:
    return data["users"][order["user_id"]]["payment_methods"]


def paid_with(order: Record) -> str:
    return order["payment_history"][0]["payment_method_id"]


def other_variants(data: dict, item: Record, *, available: bool = True) -> list[Record]:
    """Variants of the item's product other than the item itself, with the given availability."""
    variants = data["products"][item["product_id"]]["variants"].values()
    return [v for v in variants if v["item_id"] != item["item_id"] and v["available"] == available]


def another_users_method(data: dict, user_id: str, source: str | None = None) -> str:
    for uid, u in data["users"].items():
        if uid == user_id:
            continue
        for pm_id, pm in u["payment_methods"].items():
            if source is None or pm["source"] == source:
                return pm_id
    raise LookupError("no such payment method")


def is_ascii(s: str) -> bool:
    return all(ord(c) < 128 for c in s)
