"""Importing tau-bench retail tasks (tau1 and tau2) into the muarl task format.

The gold actions are kept verbatim (they define the reward). The script for the scripted customer
is derived from them and the customer's record in the store: the customer identifies the way the
gold plan does (email or name and zip), then raises one goal per write action in order, revealing
the order id, items (with the options wanted for exchanges), the reason, the payment method (by
brand and last digits) or the new address when asked. Required outputs become a final question
the agent must answer; a task without writes or outputs becomes a request the agent must decline.
The LLM instruction is tau's own text. Both benchmarks use the tau retail store (`tau-retail`).
`conversation_blocker` says why a task's gold plan cannot be carried out in a customer conversation
(tools run as the authenticated customer, so a write to another customer's records is refused), and
`split_conversational` separates such tasks, each with its reason, from the playable ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rl.tasks import goals as G
from rl.tasks.build import assemble
from rl.tasks.phrasing import address_text, item_terms, item_text, items_text, options_text, order_ref, payment_terms
from rl.tasks.schema import Action, Customer, Goal, Task
from rl.tasks.tools_meta import IDENTITY_TOOLS, TOOL_KIND, WRITE_TOOLS

SNAPSHOT = "tau-retail"
SAY = {
    "cancel": "I'd like to cancel my order {ref}.",
    "modify_address": "I need to change the shipping address of my order {ref}.",
    "modify_payment": "I want to change the payment method of my order {ref}.",
    "modify_items": "I want to change some items in my pending order {ref}.",
    "user_address": "I need to update my default address.",
    "return": "I want to return some items from my order {ref}.",
    "exchange": "I want to exchange some items from my order {ref}.",
}


class ImportError_(ValueError):
    """A benchmark file is missing or not in the expected shape."""


def _customer(store: G.Store, uid: str, actions: list[Action]) -> Customer:
    if uid not in store.users:
        raise ImportError_(f"task refers to unknown user {uid!r}")
    u = store.users[uid]
    idents = [a for a in actions if a.name in IDENTITY_TOOLS]
    working = [a for a in idents if _identifies(store, a) == uid]
    ident = working[0] if working else (idents[0] if idents else None)
    by = "name_zip" if ident is not None and ident.name == "find_user_id_by_name_zip" else "email"
    email = str(ident.arguments.get("email")) if ident is not None and by == "email" else u["email"]
    wrong = next((str(a.arguments.get("email")) for a in idents if a.name == "find_user_id_by_email"
                  and _identifies(store, a) is None), None) if by == "email" else None
    return Customer(user_id=uid, first_name=u["name"]["first_name"], last_name=u["name"]["last_name"],
                    email=email, zip=u["address"]["zip"], identify_by=by, knows_email=by == "email",
                    wrong_email=wrong if wrong and idents.index(ident) > 0 else None)


def _identifies(store: G.Store, a: Action) -> str | None:
    """The user an identity lookup finds in the store, if any."""
    try:
        return _tau2_user(store, [a])
    except ImportError_:
        return None


def _new_item(store: G.Store, order: dict | None, old_id: str, new_id: str) -> dict:
    pid = next((i["product_id"] for i in (order or {}).get("items", []) if i["item_id"] == old_id), None)
    variant = store.data["products"].get(pid, {}).get("variants", {}).get(new_id) if pid else None
    name = store.data["products"][pid]["name"] if pid else "item"
    return {"name": name, "options": (variant or {}).get("options", {"item id": new_id})}


def goal_for_write(store: G.Store, uid: str, action: Action, lookups: list[Action], gid: str) -> Goal:
    """A customer goal asking for exactly `action`, described from the store's records."""
    kind = TOOL_KIND[action.name]
    a = action.arguments
    order = store.data["orders"].get(a.get("order_id", ""))
    ref = order_ref(str(a.get("order_id", "")))
    details: dict[str, str] = {}
    terms: list[str] = []
    if "order_id" in a:
        details["order_id"] = f"It's order {ref}."
        terms.append(ref)
    if "reason" in a:
        details["reason"] = G.REASONS.get(str(a["reason"]), f"The reason is: {a['reason']}.")
    if "item_ids" in a and order is not None:
        by_id = {i["item_id"]: i for i in order["items"]}
        old = [by_id.get(i, {"name": f"item {i}", "options": {}}) for i in a["item_ids"]]
        terms += item_terms([by_id[i] for i in a["item_ids"] if i in by_id])
        if "new_item_ids" in a:
            verb = "exchange" if kind == "exchange" else "change"
            wishes = [f"{item_text(o)} for the one with {options_text(_new_item(store, order, i, n)['options'])}"
                      for o, i, n in zip(old, a["item_ids"], a["new_item_ids"], strict=False)]
            details["items"] = f"I'd like to {verb} " + "; and ".join(wishes) + "." if wishes else "Nothing."
        else:
            details["items"] = f"I want to return {items_text(old)}." if old else "Nothing."
    pm_id = a.get("payment_method_id")
    if pm_id:
        pm = store.users[uid]["payment_methods"].get(pm_id)
        if pm is not None:
            details["payment"] = f"Please use {store.pay_text(uid, pm_id)}."
            terms += payment_terms(pm)
        else:
            details["payment"] = f"Please use payment method {pm_id}."
            terms.append(str(pm_id))
    if "address1" in a:
        details["address"] = f"The new address is {address_text(a)}."
        terms.append(str(a["address1"]))
    return Goal(id=gid, kind=kind, outcome="act", say=SAY[kind].format(ref=ref), details=details,
                upfront=["order_id"] if "order_id" in a else [], action=action, lookups=lookups,
                order_id=a.get("order_id"), confirm_terms=terms)


def _question(instruction: str) -> str:
    """The information request in a tau instruction, in the customer's voice."""
    sentences = re.split(r"(?<=[.?!])\s+", instruction)
    pick = next((s for s in sentences if re.search(r"\b(know|how many|what|which|tell)\b", s, re.I)), None)
    text = pick or "I also have a question about my account."
    for a, b in ((r"\bYou are\b", "I am"), (r"\bYou\b", "I"), (r"\byou\b", "I"), (r"\byour\b", "my"),
                 (r"\bYour\b", "My"), (r"\byourself\b", "myself")):
        text = re.sub(a, b, text)
    return text


def task_from_gold(store: G.Store, *, task_id: str, uid: str, actions: list[Action], outputs: list[str],
                   instruction: str, split: str | None, source: str) -> Task:
    customer = _customer(store, uid, actions)
    goals: list[Goal] = []
    reads: list[Action] = []
    for act in actions:
        if act.name in IDENTITY_TOOLS:
            continue
        if act.name in WRITE_TOOLS:
            goals.append(goal_for_write(store, uid, act, reads, f"g{len(goals)}"))
            reads = []
        elif act.name not in ("transfer_to_human_agents",):
            reads.append(act)
    if outputs:
        goals.append(Goal(id=f"g{len(goals)}", kind="info", outcome="info", say=_question(instruction),
                          lookups=reads, answer=list(outputs)))
    elif not goals:
        goals.append(Goal(id="g0", kind="other", outcome="refuse", say=_question(instruction), lookups=reads,
                          explain="that is not something I can do for you"))
    for g in goals[1:]:
        g.say = "Also, " + g.say[0].lower() + g.say[1:] if not g.say.startswith("I ") else "Also, " + g.say
    return assemble(task_id=task_id, snapshot=SNAPSHOT, customer=customer, goals=goals, split=split,
                    tags=[source.split(":")[0]], source=source, instruction=instruction, gold=actions,
                    outputs=list(outputs))


def conversation_blocker(store: G.Store, task: Task) -> str | None:
    """Why no customer conversation can carry out `task`'s gold plan, or None when one can.

    Tools run as the authenticated customer, as in production, so a gold write must touch that
    customer's own records: one on another customer's order or account, or on an order the store
    does not have, fails whatever the agent does."""
    me = task.customer.user_id
    for a in task.gold_writes:
        oid = a.arguments.get("order_id")
        if oid is not None:
            order = store.data["orders"].get(str(oid))
            if order is None:
                return f"the gold write {a.name} targets order {oid}, which the store does not have"
            if order["user_id"] != me:
                return (f"the gold write {a.name} targets order {oid} of {order['user_id']}, but the customer "
                        f"authenticates as {me} and may only change their own records")
        uid = a.arguments.get("user_id")
        if uid is not None and uid != me:
            return (f"the gold write {a.name} targets the account of {uid}, but the customer authenticates "
                    f"as {me} and may only change their own records")
    return None


def split_conversational(tasks: list[Task], data: dict) -> tuple[list[Task], dict[str, str]]:
    """(tasks a customer conversation can carry out, {task id: why not} for the others)."""
    store = G.Store(data)
    kept: list[Task] = []
    left_out: dict[str, str] = {}
    for t in tasks:
        why = conversation_blocker(store, t)
        if why is None:
            kept.append(t)
        else:
            left_out[t.id] = why
    return kept, left_out


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise ImportError_(f"{path} not found: set --data-dir or MUARL_BENCHMARKS_DIR to the benchmarks folder")
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise ImportError_(f"{path} is not valid JSON: {e}") from None


def import_tau1(benchmarks_dir: Path, data: dict, split: str = "test") -> list[Task]:
    """tau1 retail `tasks_<split>.json` (train / test / dev)."""
    raw = _read_json(Path(benchmarks_dir) / "tau1" / "retail" / f"tasks_{split}.json")
    store = G.Store(data)
    tasks = []
    for i, t in enumerate(raw):
        actions = [Action(name=a["name"], arguments=a.get("kwargs", a.get("arguments", {}))) for a in t["actions"]]
        tasks.append(task_from_gold(store, task_id=f"tau1-retail-{split}-{i:03d}", uid=t["user_id"],
                                    actions=actions, outputs=list(t.get("outputs") or []),
                                    instruction=t["instruction"], split=split, source=f"tau1:{split}:{i}"))
    return tasks


def _tau2_user(store: G.Store, actions: list[Action]) -> str:
    for a in actions:
        if a.name == "find_user_id_by_email":
            email = str(a.arguments.get("email", "")).lower()
            for uid, u in store.users.items():
                if u["email"].lower() == email:
                    return uid
        if a.name == "find_user_id_by_name_zip":
            for uid, u in store.users.items():
                n = u["name"]
                if (n["first_name"].lower(), n["last_name"].lower(), u["address"]["zip"]) == (
                        str(a.arguments.get("first_name", "")).lower(), str(a.arguments.get("last_name", "")).lower(),
                        str(a.arguments.get("zip"))):
                    return uid
        if "user_id" in a.arguments and a.name not in IDENTITY_TOOLS:
            return str(a.arguments["user_id"])
    raise ImportError_("tau2 task names no customer in its actions")


def _tau2_customer(store: G.Store, actions: list[Action], known: str) -> str:
    """The task's customer: from the gold actions, else the owner of an order they touch, else the
    identity facts in the scenario text (email, user id, or name with zip)."""
    try:
        return _tau2_user(store, actions)
    except ImportError_:
        pass
    for a in actions:
        order = store.data["orders"].get(str(a.arguments.get("order_id", "")))
        if order is not None:
            return order["user_id"]
    low = known.lower()
    for uid, u in store.users.items():
        if u["email"].lower() in low or uid in low:
            return uid
    for uid, u in store.users.items():
        n = u["name"]
        if f"{n['first_name']} {n['last_name']}".lower() in low and u["address"]["zip"] in low:
            return uid
    raise ImportError_(f"cannot tell which customer a tau2 task is about ({known!r})")


def import_tau2(benchmarks_dir: Path, data: dict, split: str | None = None) -> list[Task]:
    """tau2 retail `tasks.json`, optionally one split of `split_tasks.json` (train / test)."""
    folder = Path(benchmarks_dir) / "tau2" / "retail"
    raw = _read_json(folder / "tasks.json")
    keep = None
    if split is not None:
        splits = _read_json(folder / "split_tasks.json")
        if split not in splits:
            raise ImportError_(f"tau2 retail has no split {split!r}; known: {sorted(splits)}")
        keep = set(map(str, splits[split]))
    store = G.Store(data)
    tasks = []
    for t in raw:
        if keep is not None and str(t["id"]) not in keep:
            continue
        crit = t.get("evaluation_criteria") or {}
        actions = [Action(name=a["name"], arguments=a.get("arguments") or {}) for a in crit.get("actions") or []]
        ins = (t.get("user_scenario") or {}).get("instructions") or {}
        instruction = " ".join(str(ins.get(k)) for k in ("known_info", "reason_for_call", "unknown_info",
                                                         "task_instructions") if ins.get(k))
        outputs = [str(x) for x in crit.get("communicate_info") or []]
        tasks.append(task_from_gold(store, task_id=f"tau2-retail-{t['id']}",
                                    uid=_tau2_customer(store, actions, str(ins.get("known_info") or "")),
                                    actions=actions, outputs=outputs, instruction=instruction, split=split,
                                    source=f"tau2:{t['id']}"))
    return tasks
