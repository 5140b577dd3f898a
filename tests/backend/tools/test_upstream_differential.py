"""Differential test: our Postgres tools in upstream-compatible mode against an independent
in-memory model of tau-bench's semantics (`upstream_reference`). Every gold action of every
tau1 retail task, plus thousands of perturbed calls (other payment methods, other variants,
wrong order states, bad reasons, repeated items, unknown ids), run in one store in sequence,
so earlier calls change what later ones see. Outputs must match (JSON by value, other text
exactly) and so must the final store."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import backend.tools.retail  # noqa: F401  (registers the tools)
from backend.store.tau_data import export_store
from backend.tools.context import Principal, ToolContext
from backend.tools.registry import RETAIL
from tests.backend.tools import upstream_reference as ref


def _same_output(ours: str, theirs: str) -> bool:
    if ours == theirs:
        return True
    try:
        return json.loads(ours) == json.loads(theirs)
    except ValueError:
        return False


def _tasks(tau_data_dir) -> list[dict[str, Any]]:
    tasks = []
    for split in ("train", "test", "dev"):
        tasks += json.loads((tau_data_dir / "tau1" / "retail" / f"tasks_{split}.json").read_text())
    return tasks


def _perturb(rng: random.Random, data: dict, action: dict) -> list[dict]:
    """Plausible wrong versions of a gold write action."""
    name, kw = action["name"], dict(action["kwargs"])
    out: list[dict] = []
    order = data["orders"].get(kw.get("order_id", ""))
    if order is not None:
        methods = list(data["users"][order["user_id"]]["payment_methods"])
        if "payment_method_id" in kw:
            out.append({"name": name, "kwargs": {**kw, "payment_method_id": rng.choice(methods)}})
            out.append({"name": name, "kwargs": {**kw, "payment_method_id": "gift_card_0000000"}})
        if "new_item_ids" in kw:
            new_ids = []
            for old in kw["item_ids"]:
                item = next((it for it in order["items"] if it["item_id"] == old), None)
                variants = list(data["products"][item["product_id"]]["variants"]) if item else ["0"]
                new_ids.append(rng.choice(variants))
            out.append({"name": name, "kwargs": {**kw, "new_item_ids": new_ids}})
            out.append({"name": name, "kwargs": {**kw, "new_item_ids": kw["new_item_ids"][:-1]}})
        if "item_ids" in kw and order["items"]:
            dup = [order["items"][0]["item_id"]] * 2
            out.append({"name": name, "kwargs": {**kw, "item_ids": dup,
                                                  **({"new_item_ids": dup} if "new_item_ids" in kw else {})}})
        other = rng.choice(list(data["orders"]))
        out.append({"name": name, "kwargs": {**kw, "order_id": other}})
    if name == "cancel_pending_order":
        out.append({"name": name, "kwargs": {**kw, "reason": "changed my mind"}})
    out.append({"name": name, "kwargs": {**kw, "order_id": "#W0000000"}} if "order_id" in kw else action)
    return out


def _reads(rng: random.Random, data: dict) -> list[dict]:
    uid = rng.choice(list(data["users"]))
    user = data["users"][uid]
    oid = rng.choice(list(data["orders"]))
    return [
        {"name": "get_user_details", "kwargs": {"user_id": uid}},
        {"name": "get_order_details", "kwargs": {"order_id": oid}},
        {"name": "find_user_id_by_email", "kwargs": {"email": user["email"].upper()}},
        {"name": "find_user_id_by_name_zip", "kwargs": {"first_name": user["name"]["first_name"].lower(),
                                                        "last_name": user["name"]["last_name"],
                                                        "zip": user["address"]["zip"]}},
        {"name": "get_product_details", "kwargs": {"product_id": rng.choice(list(data["products"]))}},
        {"name": "calculate", "kwargs": {"expression": f"{rng.randint(1, 999)}.{rng.randint(0, 99)} * 3 / 7"}},
        {"name": "modify_user_address", "kwargs": {"user_id": uid, "address1": "1 Test Way", "address2": "",
                                                   "city": "Testville", "state": "TS", "country": "USA",
                                                   "zip": "00001"}},
    ]


async def test_tools_match_upstream_semantics(tau_conn, tau_retail, tau_data_dir):
    rng = random.Random(7)
    model = copy.deepcopy(tau_retail)
    ctx = ToolContext(tau_conn, Principal.staff(), upstream_compat=True)
    calls: list[dict] = [{"name": "list_all_product_types", "kwargs": {}}, {"name": "no_such_tool", "kwargs": {}}]
    for task in _tasks(tau_data_dir):
        for action in task["actions"]:
            if rng.random() < 0.5:
                calls += _perturb(rng, model, action)
            calls.append(action)
        if rng.random() < 0.2:
            calls += _reads(rng, model)

    # Money paths that gold sequences rarely reach: change payment or items, then cancel.
    pending = [oid for oid, o in tau_retail["orders"].items() if o["status"] == "pending"]
    for oid in rng.sample(pending, 120):
        order = tau_retail["orders"][oid]
        methods = list(tau_retail["users"][order["user_id"]]["payment_methods"])
        item = order["items"][0]
        variants = list(tau_retail["products"][item["product_id"]]["variants"])
        calls += [
            {"name": "modify_pending_order_payment",
             "kwargs": {"order_id": oid, "payment_method_id": rng.choice(methods)}},
            {"name": "modify_pending_order_items", "kwargs": {"order_id": oid, "item_ids": [item["item_id"]],
                                                              "new_item_ids": [rng.choice(variants)],
                                                              "payment_method_id": rng.choice(methods)}},
            {"name": "cancel_pending_order", "kwargs": {"order_id": oid, "reason": "no longer needed"}},
        ]
        rng.shuffle(calls[-3:-1])

    mismatches = []
    for i, c in enumerate(calls):
        theirs = ref.call(model, c["name"], copy.deepcopy(c["kwargs"]))
        ours = (await RETAIL.call(ctx, c["name"], c["kwargs"])).output
        if not _same_output(ours, theirs):
            mismatches.append((i, c, ours[:300], theirs[:300]))
    assert not mismatches, f"{len(mismatches)} of {len(calls)} calls differ; first: {mismatches[:3]}"
    assert len(calls) > 2000

    exported = await export_store(tau_conn)
    for kind in ("users", "orders", "products"):
        differing = [k for k in model[kind] if exported[kind].get(k) != model[kind][k]]
        assert not differing, f"{kind} differ after the sequence: {differing[:5]}"
