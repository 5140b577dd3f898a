"""tau-bench retail data survives load/export unchanged: export(load(data)) == data, numbers
compared by value, records in their original order."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.engine import make_engine
from backend.store.tau_data import clear_store, export_store, load_store


def canonical(value: Any) -> Any:
    """JSON value with numbers compared by value (17 == 17.0) but never confused with booleans."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return ("number", Decimal(repr(float(value))) if isinstance(value, float) else Decimal(value))
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    raise TypeError(f"not JSON: {value!r}")


async def test_tau_store_exports_what_was_loaded(tau_conn: AsyncConnection, tau_retail: dict) -> None:
    exported = await export_store(tau_conn)
    assert set(exported) == {"users", "orders", "products"}
    for kind in ("users", "orders", "products"):
        assert list(exported[kind]) == list(tau_retail[kind]), f"{kind} come back in another order"
        for key, record in tau_retail[kind].items():
            assert canonical(exported[kind][key]) == canonical(record), f"{kind}[{key!r}] changed"
    assert (len(exported["users"]), len(exported["orders"]), len(exported["products"])) == (500, 1000, 50)


async def test_round_trip_into_an_empty_store_is_stable(empty_db: str, tau_retail: dict) -> None:
    """Loading an export again gives the same export (the JSON text, key order aside, is a fixpoint)."""
    engine = make_engine(empty_db, null_pool=True)
    try:
        async with engine.begin() as conn:
            await load_store(conn, json.loads(json.dumps(tau_retail)))
        async with engine.connect() as conn:
            first = await export_store(conn)
        async with engine.begin() as conn:
            await clear_store(conn)
            await load_store(conn, first)
        async with engine.connect() as conn:
            second = await export_store(conn)
    finally:
        await engine.dispose()
    assert json.dumps(second, sort_keys=True) == json.dumps(first, sort_keys=True)
    assert canonical(second) == canonical(tau_retail)
