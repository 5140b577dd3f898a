"""The synthetic store generator: deterministic by seed, every order status, money and
references consistent, and a seeded store survives load/export unchanged (also through the
`muarl store seed` command)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.engine import make_engine
from backend.store.seed import CANCEL_REASONS, ORDER_STATUSES, generate_store
from backend.store.service import export_current_store
from backend.store.tau_data import export_store, load_store

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def canonical(value: Any) -> Any:
    """JSON value with numbers compared by value (17 == 17.0) but never confused with booleans."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float | Decimal):
        return ("number", Decimal(repr(float(value))) if isinstance(value, float) else Decimal(value))
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    raise TypeError(f"not JSON: {value!r}")


def cents(amount: float) -> int:
    exact = Decimal(repr(amount))
    assert exact == exact.quantize(Decimal("0.01")), f"{amount} is not exact to the cent"
    return int(exact * 100)


@pytest.fixture(scope="module")
def store() -> dict:
    return generate_store(0, 300)


def test_same_seed_and_size_give_the_identical_store() -> None:
    a, b = generate_store(7, 60), generate_store(7, 60)
    assert json.dumps(a) == json.dumps(b)  # same content and the same key order
    assert generate_store(8, 60) != a
    assert len(generate_store(7, 61)["users"]) == 61


@pytest.mark.parametrize("users", [1, 2, 5, 300])
def test_every_order_status_occurs(users: int) -> None:
    data = generate_store(users, users)
    assert len(data["users"]) == users
    assert set(Counter(o["status"] for o in data["orders"].values())) == set(ORDER_STATUSES)


def test_a_store_needs_a_user() -> None:
    with pytest.raises(ValueError):
        generate_store(0, 0)


def test_customers_are_complete_and_identifiable(store: dict) -> None:
    users = store["users"]
    assert len({u["email"].lower() for u in users.values()}) == len(users)
    name_zips = {(u["name"]["first_name"].lower(), u["name"]["last_name"].lower(), u["address"]["zip"])
                 for u in users.values()}
    assert len(name_zips) == len(users)
    sources = Counter()
    for uid, u in users.items():
        assert set(u["address"]) == {"address1", "address2", "city", "country", "state", "zip"}
        assert 1 <= len(u["payment_methods"]) <= 4
        for pm_id, pm in u["payment_methods"].items():
            assert pm["id"] == pm_id and pm_id.startswith(pm["source"] + "_")
            sources[pm["source"]] += 1
            if pm["source"] == "gift_card":
                assert pm["balance"] >= 0
                cents(pm["balance"])
            elif pm["source"] == "credit_card":
                assert pm["brand"] and len(pm["last_four"]) == 4
            else:
                assert set(pm) == {"source", "id"}
        for oid in u["orders"]:
            assert store["orders"][oid]["user_id"] == uid
    assert set(sources) == {"credit_card", "paypal", "gift_card"}
    assert sum(len(u["orders"]) for u in users.values()) == len(store["orders"])


def test_catalogue_has_many_types_with_exchangeable_variants(store: dict) -> None:
    products = store["products"]
    assert len(products) >= 40
    assert len({p["name"] for p in products.values()}) == len(products)
    for pid, p in products.items():
        assert p["product_id"] == pid
        assert sum(v["available"] for v in p["variants"].values()) >= 2
        for vid, v in p["variants"].items():
            assert v["item_id"] == vid and v["options"] and v["price"] > 0
            cents(v["price"])


def test_orders_reference_existing_records(store: dict) -> None:
    products, users = store["products"], store["users"]
    variant_product = {vid: pid for pid, p in products.items() for vid in p["variants"]}
    for oid, o in store["orders"].items():
        assert o["order_id"] == oid and oid in users[o["user_id"]]["orders"]
        methods = users[o["user_id"]]["payment_methods"]
        for it in o["items"]:
            variant = products[it["product_id"]]["variants"][it["item_id"]]
            assert it["name"] == products[it["product_id"]]["name"]
            assert (it["price"], it["options"]) == (variant["price"], variant["options"])
        for t in o["payment_history"]:
            assert t["payment_method_id"] in methods
        for key in ("return_payment_method_id", "exchange_payment_method_id"):
            if key in o:
                assert o[key] in methods
        order_items = Counter(it["item_id"] for it in o["items"])
        for key in ("return_items", "exchange_items"):
            if key in o:
                assert o[key] == sorted(o[key]) and not Counter(o[key]) - order_items
        if "exchange_new_items" in o:
            order_products = {it["product_id"] for it in o["items"]}
            for vid in o["exchange_new_items"]:
                assert variant_product[vid] in order_products and products[variant_product[vid]][
                    "variants"][vid]["available"]


def test_payment_history_matches_the_items(store: dict) -> None:
    for oid, o in store["orders"].items():
        total = sum(cents(it["price"]) for it in o["items"])
        paid: dict[str, int] = defaultdict(int)
        for t in o["payment_history"]:
            assert t["transaction_type"] in ("payment", "refund") and t["amount"] > 0
            paid[t["payment_method_id"]] += cents(t["amount"]) * (1 if t["transaction_type"] == "payment" else -1)
        assert all(v >= 0 for v in paid.values()), f"{oid} refunds more than was paid to a method"
        net = sum(paid.values())
        if o["status"] == "cancelled":
            assert net == 0 and o["cancel_reason"] in CANCEL_REASONS, oid
            assert o["payment_history"][-1]["transaction_type"] == "refund"
        else:
            assert net == total, oid
            assert "cancel_reason" not in o


def test_status_specific_fields(store: dict) -> None:
    products = store["products"]
    request_keys = {"cancel_reason", "return_items", "return_payment_method_id", "exchange_items",
                    "exchange_new_items", "exchange_payment_method_id", "exchange_price_difference"}
    expected_keys = {
        "cancelled": {"cancel_reason"},
        "return requested": {"return_items", "return_payment_method_id"},
        "exchange requested": {"exchange_items", "exchange_new_items", "exchange_payment_method_id",
                               "exchange_price_difference"},
    }
    price = {vid: v["price"] for p in products.values() for vid, v in p["variants"].items()}
    for oid, o in store["orders"].items():
        assert request_keys & set(o) == expected_keys.get(o["status"], set()), oid
        shipped = Counter(i for f in o["fulfillments"] for i in f["item_ids"])
        if o["status"].startswith("pending"):
            assert o["fulfillments"] == []
        else:
            assert shipped == Counter(it["item_id"] for it in o["items"]), oid
            assert all(len(f["tracking_id"]) == 1 and f["tracking_id"][0].isdigit() for f in o["fulfillments"])
        if o["status"] == "pending (item modified)":
            assert len(o["payment_history"]) <= 2
        if o["status"] == "exchange requested":
            diff = sum(cents(price[v]) for v in o["exchange_new_items"]) - sum(
                cents(price[v]) for v in o["exchange_items"])
            assert cents(o["exchange_price_difference"]) == diff
            pm = store["users"][o["user_id"]]["payment_methods"][o["exchange_payment_method_id"]]
            assert pm["source"] != "gift_card" or cents(pm["balance"]) >= diff
        if o["status"] == "return requested":
            pm_id = o["return_payment_method_id"]
            assert pm_id.startswith("gift_card_") or pm_id == o["payment_history"][0]["payment_method_id"]


def test_two_thousand_users_generate_in_a_few_seconds() -> None:
    start = time.perf_counter()
    data = generate_store(0, 2000)
    elapsed = time.perf_counter() - start
    assert len(data["users"]) == 2000 and len(data["orders"]) >= 4000
    assert elapsed < 5.0, f"generating 2,000 users took {elapsed:.2f} s"


async def test_seeded_store_round_trips_through_the_database(empty_db: str) -> None:
    data = generate_store(3, 150)
    engine = make_engine(empty_db, null_pool=True)
    try:
        async with engine.begin() as conn:
            counts = await load_store(conn, data)
        async with engine.connect() as conn:
            exported = await export_store(conn)
    finally:
        await engine.dispose()
    assert counts == {"users": 150, "orders": len(data["orders"]), "products": len(data["products"])}
    for kind in ("users", "orders", "products"):
        assert list(exported[kind]) == list(data[kind])
    assert canonical(exported) == canonical(data)


async def test_seeded_store_satisfies_the_database_constraints(empty_db: str) -> None:
    """Money columns and checks accept every generated record (no negative balance, cents)."""
    engine = make_engine(empty_db, null_pool=True)
    try:
        async with engine.begin() as conn:
            await load_store(conn, generate_store(11, 40))
            await _assert_no_negative_amounts(conn)
    finally:
        await engine.dispose()


async def _assert_no_negative_amounts(conn: AsyncConnection) -> None:
    from sqlalchemy import text

    assert await conn.scalar(text("SELECT count(*) FROM payment_methods WHERE balance < 0")) == 0
    assert await conn.scalar(text("SELECT count(*) FROM payment_transactions WHERE amount <> round(amount, 2)")) == 0


def _muarl(*args: str, database_url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


async def test_seed_command_loads_the_generated_store(empty_db: str, tmp_path: Path) -> None:
    first = _muarl("store", "seed", "--seed", "5", "--users", "25", database_url=empty_db)
    assert first.returncode == 0, first.stderr
    assert "seeded 25 users" in first.stderr
    assert canonical(await export_current_store(empty_db)) == canonical(generate_store(5, 25))

    refused = _muarl("store", "seed", "--seed", "6", "--users", "10", database_url=empty_db)
    assert refused.returncode == 2 and "--replace" in refused.stderr
    assert canonical(await export_current_store(empty_db)) == canonical(generate_store(5, 25))

    replaced = _muarl("store", "seed", "--seed", "6", "--users", "10", "--replace", database_url=empty_db)
    assert replaced.returncode == 0, replaced.stderr
    assert canonical(await export_current_store(empty_db)) == canonical(generate_store(6, 10))

    out = tmp_path / "store.json"
    written = _muarl("store", "seed", "--seed", "6", "--users", "10", "--out", str(out), database_url=empty_db)
    assert written.returncode == 0, written.stderr
    assert json.loads(out.read_text()) == generate_store(6, 10)


async def test_tools_work_on_a_seeded_store(empty_db: str) -> None:
    """The retail tools read every status of a seeded store and keep its money consistent."""
    import backend.tools.retail  # noqa: F401  (registers the tools)
    from backend.tools.context import Principal, ToolContext
    from backend.tools.registry import RETAIL

    data = generate_store(21, 30)
    engine = make_engine(empty_db, null_pool=True)
    try:
        async with engine.begin() as conn:
            await load_store(conn, data)
        async with engine.connect() as conn:
            ctx = ToolContext(conn, Principal.staff())
            for status in ORDER_STATUSES:
                oid = next(k for k, o in data["orders"].items() if o["status"] == status)
                res = await RETAIL.call(ctx, "get_order_details", {"order_id": oid})
                assert canonical(json.loads(res.output)) == canonical(data["orders"][oid])
            pending = next(o for o in data["orders"].values() if o["status"] == "pending")
            res = await RETAIL.call(ctx, "cancel_pending_order", {"order_id": pending["order_id"],
                                                                   "reason": "no longer needed"})
            assert res.ok, res.output
            order = (await export_store(conn))["orders"][pending["order_id"]]
            net = sum(cents(t["amount"]) * (1 if t["transaction_type"] == "payment" else -1)
                      for t in order["payment_history"])
            assert order["status"] == "cancelled" and net == 0
    finally:
        await engine.dispose()
