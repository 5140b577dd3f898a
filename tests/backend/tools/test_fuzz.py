"""Property-based fuzzing of the tool layer (hypothesis) on the real tau retail store.

Random tool names and arguments (wrong types, missing or extra arguments, empty, huge and
NUL-bearing strings, arguments that are not an object at all) and random sequences of
valid-looking write calls on real orders, items and payment methods. Whatever comes in:
no exception escapes `RETAIL.call`, every output is a string, a failed call writes nothing,
gift-card balances never go negative, every order only references its customer's payment
methods and real variants of its products, and in the default mode every order's money is
consistent and exact to the cent (payments minus refunds equal the items' total, zero once
cancelled; refunds never exceed payments). A customer conversation never changes another
customer's records.

Each example runs in a savepoint of one shared store copy that is rolled back afterwards.
`MUARL_FUZZ_EXAMPLES` raises the number of examples (and switches to random exploration).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.tau_data import read_tau_retail
from backend.tools.context import Principal
from backend.tools.registry import RETAIL
from tests.backend.tools.retail_harness import Desk
from tests.conftest import benchmarks_dir

_EXTRA = int(os.environ.get("MUARL_FUZZ_EXAMPLES", "0"))
FUZZ = settings(
    max_examples=_EXTRA or 40,
    deadline=None,
    derandomize=not _EXTRA,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOOL_NAMES = RETAIL.names
WRITE_TOOLS = [t.name for t in RETAIL if t.kind == "write"]
REASONS = ["no longer needed", "ordered by mistake", "other", ""]
FITTING_TOOLS = {  # the write tools an order in this status accepts
    "pending": ["cancel_pending_order", "modify_pending_order_address", "modify_pending_order_payment",
                "modify_pending_order_items", "modify_user_address"],
    "delivered": ["return_delivered_order_items", "exchange_delivered_order_items"],
}


# ---------------------------------------------------------------- pools of real ids


def _pools() -> dict[str, Any]:
    """A few orders of every status, with their customers' methods and their products' variants."""
    try:
        data = read_tau_retail(benchmarks_dir())
    except FileNotFoundError:  # the fixtures skip (or fail under CI) before any example runs
        return {"orders": [{"order_id": "#W0", "user_id": "u", "items": [], "status": "pending"}], "users": {},
                "variants": {}, "available": {}, "all_methods": ["paypal_0"]}
    picked: list[dict] = []
    for status, count in (("pending", 12), ("delivered", 8), ("processed", 2), ("cancelled", 2)):
        picked += [o for o in data["orders"].values() if o["status"] == status][:count]
    variants = {pid: list(p["variants"]) for pid, p in data["products"].items()}
    available = {pid: [v for v, var in p["variants"].items() if var["available"]]
                 for pid, p in data["products"].items()}
    methods = [pm for u in data["users"].values() for pm in u["payment_methods"]]
    return {"orders": picked, "users": data["users"], "variants": variants, "available": available,
            "all_methods": methods[:40]}


POOLS = _pools()

# ---------------------------------------------------------------- strategies

BAD_STRINGS = st.one_of(
    st.text(max_size=30),
    st.just(""),
    st.just("\x00"),
    st.text(max_size=10).map(lambda s: s + "\x00" + s),
    st.integers(min_value=10_000, max_value=30_000).map(lambda n: "x" * n),
    st.sampled_from(["#W0000000", "'; DROP TABLE orders; --", "%", "_", "\\", "ü" * 50, "\ud7ff", "null"]),
    st.sampled_from(["\ud800", "a\udfffb"]),  # lone surrogates, as json.loads can produce
)
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), BAD_STRINGS)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=10,
)


@st.composite
def garbage_call(draw) -> tuple[str, Any]:
    name = draw(st.one_of(st.sampled_from(TOOL_NAMES), st.sampled_from(TOOL_NAMES).map(str.upper),
                          st.text(max_size=20), st.just("")))
    tool = RETAIL.get(name)
    params = [p.name for p in tool.params] if tool else []
    keys = st.one_of(st.sampled_from(params), st.text(max_size=10)) if params else st.text(max_size=10)
    args = draw(st.one_of(
        st.dictionaries(keys, JSON_VALUES, max_size=len(params) + 2),
        st.fixed_dictionaries({p: JSON_VALUES for p in params}),
        st.lists(JSON_SCALARS, max_size=3),
        JSON_SCALARS,
        st.sampled_from(["{", "{}", "[]", '{"order_id": 1}', "null", "1e999", '{"a": ' * 200]),
    ))
    return name, args


@st.composite
def store_call(draw) -> tuple[str, dict[str, Any]]:
    """A well-typed call on real records. Most are well-formed (the customer's own methods, items of
    the order, available variants of the same product, a tool that fits the order's status); a
    quarter are sloppy (foreign methods, repeated or unknown items, mismatched lists, any tool)."""
    sloppy = draw(st.integers(min_value=0, max_value=3)) == 0
    order = draw(st.sampled_from(POOLS["orders"]))
    oid = order["order_id"]
    own = list(POOLS["users"].get(order["user_id"], {"payment_methods": {}})["payment_methods"]) or ["paypal_0"]
    foreign = POOLS["all_methods"][:3] + ["gift_card_0000000", ""]
    method = draw(st.sampled_from(own + foreign if sloppy else own))
    items = order["items"] or [{"item_id": "0", "product_id": "0"}]
    if sloppy:
        olds = draw(st.lists(st.sampled_from([it["item_id"] for it in items] + ["0"]), max_size=4))
    else:
        picked = draw(st.lists(st.sampled_from(range(len(items))), min_size=1, max_size=len(items), unique=True))
        olds = [items[i]["item_id"] for i in picked]
    news = []
    for old in olds:
        product = next((it["product_id"] for it in items if it["item_id"] == old), "0")
        pool = POOLS["variants"] if sloppy else POOLS["available"]
        news.append(draw(st.sampled_from(pool.get(product) or ["0"])))
    if sloppy and draw(st.booleans()):
        news = news[:-1] if news else ["0"]

    fitting = FITTING_TOOLS.get(order["status"], ["get_order_details"])
    name = draw(st.sampled_from(WRITE_TOOLS + ["get_order_details"] if sloppy else fitting))
    address = draw(st.fixed_dictionaries({k: st.one_of(st.text(max_size=12), st.just(""))
                                          for k in ("address1", "address2", "city", "state", "country", "zip")}))
    if name == "cancel_pending_order":
        return name, {"order_id": oid, "reason": draw(st.sampled_from(REASONS if sloppy else REASONS[:2]))}
    if name == "modify_pending_order_address":
        return name, {"order_id": oid, **address}
    if name == "modify_user_address":
        return name, {"user_id": order["user_id"], **address}
    if name == "modify_pending_order_payment":
        return name, {"order_id": oid, "payment_method_id": method}
    if name in ("modify_pending_order_items", "exchange_delivered_order_items"):
        return name, {"order_id": oid, "item_ids": olds, "new_item_ids": news, "payment_method_id": method}
    if name == "return_delivered_order_items":
        return name, {"order_id": oid, "item_ids": olds, "payment_method_id": method}
    return name, {"order_id": oid}


GARBAGE = st.lists(garbage_call(), min_size=1, max_size=8)
WRITES = st.lists(store_call(), min_size=3, max_size=8)
MIXED = st.lists(st.one_of(store_call(), store_call(), garbage_call()), min_size=1, max_size=8)

# ---------------------------------------------------------------- invariants

_BROKEN_REFERENCES = """
SELECT
  (SELECT count(*) FROM payment_methods WHERE balance < 0 OR (source = 'gift_card' AND balance IS NULL)),
  (SELECT count(*) FROM order_items i LEFT JOIN variants v ON v.item_id = i.item_id AND v.product_id = i.product_id
     WHERE v.item_id IS NULL),
  (SELECT count(*) FROM payment_transactions t JOIN orders o ON o.id = t.order_id
     LEFT JOIN payment_methods p ON p.id = t.payment_method_id AND p.customer_id = o.customer_id WHERE p.id IS NULL),
  (SELECT count(*) FROM orders o LEFT JOIN payment_methods p
     ON p.id = coalesce(o.return_payment_method_id, o.exchange_payment_method_id) AND p.customer_id = o.customer_id
     WHERE coalesce(o.return_payment_method_id, o.exchange_payment_method_id) IS NOT NULL AND p.id IS NULL)
"""

_INCONSISTENT_MONEY = """
SELECT o.id, o.status, coalesce(t.paid, 0), coalesce(t.refunded, 0), coalesce(i.total, 0)
FROM orders o
LEFT JOIN (SELECT order_id,
                  sum(amount) FILTER (WHERE transaction_type = 'payment') AS paid,
                  sum(amount) FILTER (WHERE transaction_type = 'refund') AS refunded,
                  bool_or(amount <> round(amount, 2)) AS inexact
           FROM payment_transactions GROUP BY order_id) t ON t.order_id = o.id
LEFT JOIN (SELECT order_id, sum(price) AS total FROM order_items GROUP BY order_id) i ON i.order_id = o.id
WHERE coalesce(t.refunded, 0) > coalesce(t.paid, 0)
   OR coalesce(t.paid, 0) - coalesce(t.refunded, 0)
      <> CASE WHEN o.status = 'cancelled' THEN 0 ELSE coalesce(i.total, 0) END
   OR coalesce(t.inexact, false)
LIMIT 5
"""


async def assert_invariants(conn: AsyncConnection, *, money: bool) -> None:
    broken = (await conn.execute(text(_BROKEN_REFERENCES))).one()
    assert tuple(broken) == (0, 0, 0, 0), f"negative balances / unknown variants / foreign methods: {tuple(broken)}"
    if money:
        rows = (await conn.execute(text(_INCONSISTENT_MONEY))).all()
        assert not rows, f"orders whose money does not add up: {rows}"


async def _others_fingerprint(conn: AsyncConnection, user_id: str) -> str:
    return await conn.scalar(text("""
        SELECT md5(concat_ws('|',
          (SELECT string_agg(c::text, ',' ORDER BY c.id) FROM customers c WHERE c.id <> :u),
          (SELECT string_agg(p::text, ',' ORDER BY p.id) FROM payment_methods p WHERE p.customer_id <> :u),
          (SELECT string_agg(o::text, ',' ORDER BY o.id) FROM orders o WHERE o.customer_id <> :u),
          (SELECT string_agg(t::text, ',' ORDER BY t.order_id, t.seq) FROM payment_transactions t
             JOIN orders o ON o.id = t.order_id WHERE o.customer_id <> :u),
          (SELECT string_agg(i::text, ',' ORDER BY i.order_id, i.seq) FROM order_items i
             JOIN orders o ON o.id = i.order_id WHERE o.customer_id <> :u)))"""), {"u": user_id})


# ---------------------------------------------------------------- properties


async def _run_calls(desk: Desk, calls: list[tuple[str, Any]], *, money: bool) -> None:
    before = await desk.fingerprint()
    for name, args in calls:
        res = await RETAIL.call(desk.ctx, name, args)  # must not raise, whatever the input
        assert isinstance(res.output, str)
        after = await desk.fingerprint()
        if not res.ok:
            assert res.output.startswith("Error: ") or res.output.startswith("Unknown action "), res.output[:200]
            assert after == before, f"failed call {name}({str(args)[:200]}) wrote to the store: {res.output[:200]}"
        elif RETAIL.get(name) is not None and RETAIL.get(name).read_only:
            assert after == before, f"read-only {name} wrote to the store"
        await assert_invariants(desk.conn, money=money)
        before = after


async def test_the_store_starts_consistent(store_conn: AsyncConnection) -> None:
    """The invariants hold on the untouched tau store (so a violation later is the tools' doing)."""
    await assert_invariants(store_conn, money=True)


@FUZZ
@given(calls=GARBAGE, compat=st.booleans())
async def test_fuzz_garbage_calls(store_conn: AsyncConnection, calls: list[tuple[str, Any]], compat: bool) -> None:
    """Unknown tools, wrong types, missing / extra arguments, strings that are empty, huge or carry NULs."""
    savepoint = await store_conn.begin_nested()
    try:
        await _run_calls(Desk(store_conn, compat=compat), calls, money=True)
    finally:
        await savepoint.rollback()


@settings(FUZZ, max_examples=_EXTRA or 40)
@given(calls=WRITES)
async def test_fuzz_write_sequences_default_mode(store_conn: AsyncConnection, calls: list[tuple[str, Any]]) -> None:
    savepoint = await store_conn.begin_nested()
    try:
        await _run_calls(Desk(store_conn), calls, money=True)
    finally:
        await savepoint.rollback()


@settings(FUZZ, max_examples=_EXTRA or 25)
@given(calls=WRITES)
async def test_fuzz_write_sequences_upstream_compatible_mode(store_conn: AsyncConnection,
                                                             calls: list[tuple[str, Any]]) -> None:
    """Upstream's money quirks are allowed here; references and balances must still hold."""
    savepoint = await store_conn.begin_nested()
    try:
        await _run_calls(Desk(store_conn, compat=True), calls, money=False)
    finally:
        await savepoint.rollback()


@settings(FUZZ, max_examples=_EXTRA or 25)
@given(calls=MIXED, who=st.integers(min_value=0, max_value=len(POOLS["orders"]) - 1))
async def test_fuzz_customer_cannot_touch_other_customers(store_conn: AsyncConnection,
                                                          calls: list[tuple[str, Any]], who: int) -> None:
    user_id = POOLS["orders"][who]["user_id"]
    savepoint = await store_conn.begin_nested()
    try:
        desk = Desk(store_conn, principal=Principal.customer(user_id))
        others = await _others_fingerprint(store_conn, user_id)
        for name, args in calls:
            res = await RETAIL.call(desk.ctx, name, args)
            assert isinstance(res.output, str)
            assert desk.ctx.principal.user_id == user_id
            assert await _others_fingerprint(store_conn, user_id) == others, f"{name} changed another customer"
        await assert_invariants(store_conn, money=True)
    finally:
        await savepoint.rollback()
