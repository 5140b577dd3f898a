"""Generating interactive tasks from any store snapshot, deterministic by seed.

`generate_tasks(data, n, seed, snapshot=...)` cycles through a schedule of categories (a category
listed k times takes k slots, for weighted mixes) - every
tool-backed intent (cancel, modify address / items / payment, default address, return, exchange,
information questions), the refusals the policy demands (cancelling a non-pending order, a refund
to a card the order was not paid with, another customer's order) - and variants: goal shift (the
first stated intent is abandoned when the agent asks to confirm), haggling (the customer insists on
a forbidden request, then accepts a fallback or gives up), multi-intent, late information (an item
added only when the agent asks whether the list is complete) and identity mistakes (a mistyped
email first). Customers are assigned to train or test by a hash of (seed, user id), so the splits
never share a customer.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from typing import Any

from rl.tasks import goals as G
from rl.tasks.build import assemble
from rl.tasks.phrasing import order_ref, payment_terms
from rl.tasks.schema import Action, Customer, Goal, GoalShift, Haggle, Task

SHIFT_LINES = ["Actually, wait - I've changed my mind, please don't do that.",
               "Hmm, on second thought, let's not do that."]


def split_of(user_id: str, seed: int, test_fraction: float) -> str:
    h = int(hashlib.sha256(f"{seed}:{user_id}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "test" if h < test_fraction else "train"


def _customer(store: G.Store, uid: str, rng: random.Random, identity_mistake: bool = False) -> Customer:
    u = store.users[uid]
    by = "email" if identity_mistake else rng.choice(["email", "name_zip"])
    wrong = None
    if identity_mistake:
        local, _, domain = u["email"].partition("@")
        wrong = f"{local[:-1] if len(local) > 3 else local + 'x'}@{domain}"
    return Customer(user_id=uid, first_name=u["name"]["first_name"], last_name=u["name"]["last_name"],
                    email=u["email"], zip=u["address"]["zip"], identify_by=by, wrong_email=wrong,
                    knows_email=by == "email")


# ----------------------------------------------------------------- info and refusal goals

def info_status(store: G.Store, uid: str, rng: random.Random, used: G.Used, gid: str, **_: Any) -> Goal | None:
    # Only shipped orders: the answer includes the tracking number, which cannot be guessed, so an
    # agent that never authenticated or looked the order up cannot pass by naming a status word.
    shipped = [o for o in store.orders(uid) if _tracking_id(o)]
    order = G._pick(rng, G._free(shipped, used))
    if order is None:
        return None
    ref = order_ref(order["order_id"])
    return Goal(id=gid, kind="info", outcome="info",
                say=f"What is the current status of my order {ref}, and what is its tracking number?",
                upfront=["order_id"], details={"order_id": f"It's order {ref}."}, order_id=order["order_id"],
                lookups=[Action(name="get_order_details", arguments={"order_id": order["order_id"]})],
                answer=[order["status"], _tracking_id(order)])


def _tracking_id(order: dict[str, Any]) -> str | None:
    for f in order.get("fulfillments") or []:
        for tracking in f.get("tracking_id") or []:
            return str(tracking)
    return None


def info_count(store: G.Store, uid: str, rng: random.Random, used: G.Used, gid: str, **_: Any) -> Goal | None:
    pid = rng.choice(sorted(store.data["products"]))
    p = store.product(pid)
    n = sum(1 for v in p["variants"].values() if v["available"])
    return Goal(id=gid, kind="info", outcome="info",
                say=f"How many {p['name']} options do you have available right now?",
                details={"product": f"The {p['name']}."},
                lookups=[Action(name="list_all_product_types", arguments={}),
                         Action(name="get_product_details", arguments={"product_id": pid})],
                answer=[str(n)])


def refuse_cancel(store: G.Store, uid: str, rng: random.Random, used: G.Used, gid: str,
                  haggle: bool = False, **_: Any) -> list[Goal] | None:
    """Cancel a processed / delivered order: forbidden. Haggling on a delivered one ends in a return."""
    statuses = ("delivered",) if haggle else ("processed", "delivered")
    order = G._pick(rng, G._free(store.orders(uid, *statuses), used))
    if order is None:
        return None
    used.orders.add(order["order_id"])
    ref = order_ref(order["order_id"])
    goal = Goal(id=gid, kind="cancel", outcome="refuse", say=f"I want to cancel my order {ref}.",
                upfront=["order_id"], details={"order_id": f"It's order {ref}.", "reason": "I no longer need it."},
                action=Action(name="cancel_pending_order", arguments={"order_id": order["order_id"],
                                                                      "reason": "no longer needed"}),
                lookups=[Action(name="get_order_details", arguments={"order_id": order["order_id"]})],
                order_id=order["order_id"], confirm_terms=[ref],
                explain=f"order {ref} is already {order['status']}, and only pending orders can be cancelled")
    if not haggle:
        return [goal]
    fallback = G.return_items(store, uid, rng, used, f"{gid}b", order=order,
                              pm_id=order["payment_history"][0]["payment_method_id"])
    if fallback is None or fallback.action is None:
        return None
    goal.haggle = Haggle(demands=_demands(rng, "cancel it"), then="accept",
                         say_after="Fine. Then I'll just return it. " + fallback.details["items"])
    return [goal, fallback]


def refuse_refund_card(store: G.Store, uid: str, rng: random.Random, used: G.Used, gid: str,
                       haggle: bool = False, **_: Any) -> list[Goal] | None:
    """Refund a return to a card or PayPal the order was not paid with: forbidden."""
    for order in G._free(store.orders(uid, "delivered"), used):
        paid = {p["payment_method_id"] for p in order["payment_history"]}
        bad = [p for pid, p in store.users[uid]["payment_methods"].items()
               if pid not in paid and p["source"] != "gift_card"]
        if not bad:
            continue
        pm = rng.choice(bad)
        original = order["payment_history"][0]["payment_method_id"]
        fallback = G.return_items(store, uid, rng, used, f"{gid}b", order=order, pm_id=original)
        if fallback is None or fallback.action is None:
            continue
        ref = order_ref(order["order_id"])
        want = store.pay_text(uid, pm["id"])
        goal = fallback.model_copy(update={
            "id": gid, "outcome": "refuse", "say": f"I want to return items from my order {ref}, refunded to {want}.",
            "upfront": ["order_id", "payment"],
            "details": {**fallback.details, "payment": f"Please refund {want}."},
            "action": Action(name=fallback.action.name, arguments={**fallback.action.arguments,
                                                                   "payment_method_id": pm["id"]}),
            "confirm_terms": [ref, *payment_terms(pm)],
            "explain": "a refund can only go to the original payment method or one of your gift cards",
        })
        if not haggle:
            return [goal]
        goal.haggle = Haggle(demands=_demands(rng, f"get the refund on {want}"), then="accept",
                             say_after="Alright, then refund it to the original payment method.")
        fallback.details = {**fallback.details, "payment": "Refund it to the original payment method."}
        return [goal, fallback]
    return None


def refuse_other_customer(store: G.Store, uid: str, rng: random.Random, used: G.Used, gid: str,
                          **_: Any) -> list[Goal] | None:
    others = [o for o in store.data["orders"].values() if o["user_id"] != uid and o["status"] == "pending"]
    order = rng.choice(sorted(others, key=lambda o: o["order_id"])) if others else None
    if order is None:
        return None
    ref = order_ref(order["order_id"])
    return [Goal(id=gid, kind="cancel", outcome="refuse", say=f"Also, please cancel my friend's order {ref}.",
                 upfront=["order_id"], details={"order_id": f"It's order {ref}.", "reason": "They no longer need it."},
                 action=Action(name="cancel_pending_order", arguments={"order_id": order["order_id"],
                                                                       "reason": "no longer needed"}),
                 order_id=order["order_id"], confirm_terms=[ref],
                 explain="I can only help with the account of the customer I am speaking with")]


def lower_first(s: str) -> str:
    return s if s.startswith(("I ", "I'")) else s[:1].lower() + s[1:]


def _demands(rng: random.Random, what: str) -> list[str]:
    lines = [f"Are you sure? I really need to {what}.",
             f"Please, can't you make an exception? I really want to {what}.",
             f"This is ridiculous. I insist, I want to {what}."]
    return lines[: rng.randint(1, 3)]


# ----------------------------------------------------------------- categories

Builder = Callable[[G.Store, str, random.Random, G.Used], tuple[list[Goal], list[str]] | None]


def _one(kind: str, **kw: Any) -> Builder:
    def build(store, uid, rng, used):
        fn = G.ACT_BUILDERS.get(kind) or {"info_status": info_status, "info_count": info_count}[kind]
        g = fn(store, uid, rng, used, "g0", **kw)
        return ([g], ["late_info"] if kw.get("late") else []) if g else None
    return build


def _refusal(fn: Callable, haggle: bool = False, tag: str | None = None) -> Builder:
    def build(store, uid, rng, used):
        goals = fn(store, uid, rng, used, "g0", haggle=haggle)
        return (goals, [tag] if tag else []) if goals else None
    return build


SHIFT_PAIRS = [("cancel", "modify_address"), ("cancel", "modify_payment"), ("modify_address", "cancel"),
               ("modify_items", "cancel"), ("return", "exchange"), ("exchange", "return"), ("cancel", "cancel")]


def _shift(first: str, second: str) -> Builder:
    def build(store, uid, rng, used):
        a = G.ACT_BUILDERS[first](store, uid, rng, used, "g0")
        if a is None:
            return None
        same = first != second
        order = store.data["orders"][a.order_id] if same and a.order_id else None
        b = G.ACT_BUILDERS[second](store, uid, rng, G.Used(orders=set() if same else set(used.orders)), "g1",
                                   **({"order": order} if order else {}))
        if b is None:
            return None
        a.outcome = "abandon"
        if b.order_id:
            b.say = b.say.replace("one of my orders", f"my order {order_ref(b.order_id)}")
            b.upfront = list(dict.fromkeys([*b.upfront, "order_id"]))
        trigger = "confirmation" if rng.random() < 0.8 else "agent_turn"
        a.shift = GoalShift(trigger=trigger, after_turns=2,
                            say=f"{rng.choice(SHIFT_LINES)} Instead, {lower_first(b.say)}")
        return [a, b], []
    return build


def _multi(kinds: list[str]) -> Builder:
    def build(store, uid, rng, used):
        out = []
        for i, k in enumerate(kinds):
            fn = G.ACT_BUILDERS.get(k) or {"info_status": info_status, "info_count": info_count}[k]
            g = fn(store, uid, rng, used, f"g{i}")
            if g is None:
                return None
            out.append(g)
        for g in out[1:]:
            g.say = "One more thing: " + lower_first(g.say)
        return out, []
    return build


def _identity(inner: Builder) -> Builder:
    def build(store, uid, rng, used):
        r = inner(store, uid, rng, used)
        return (r[0], r[1] + ["identity", "identity_mistake"]) if r else None
    return build


def _with_other_customer(inner: Builder) -> Builder:
    def build(store, uid, rng, used):
        r = inner(store, uid, rng, used)
        extra = refuse_other_customer(store, uid, rng, used, "g9")
        return (r[0] + extra, r[1] + ["identity"]) if r and extra else None
    return build


SCHEDULE: list[tuple[str, Builder]] = [
    ("cancel", _one("cancel")), ("modify_address", _one("modify_address")),
    ("modify_payment", _one("modify_payment")), ("modify_items", _one("modify_items")),
    ("user_address", _one("user_address")), ("return", _one("return")), ("exchange", _one("exchange")),
    ("info_status", _one("info_status")), ("info_count", _one("info_count")),
    ("refuse_cancel", _refusal(refuse_cancel)), ("refuse_refund_card", _refusal(refuse_refund_card)),
    *[(f"shift_{a}_{b}", _shift(a, b)) for a, b in SHIFT_PAIRS],
    ("haggle_cancel", _refusal(refuse_cancel, haggle=True)),
    ("haggle_refund_card", _refusal(refuse_refund_card, haggle=True)),
    ("multi_cancel_return", _multi(["cancel", "return"])), ("multi_info_exchange", _multi(["info_status", "exchange"])),
    ("multi_address_items", _multi(["modify_address", "modify_items", "user_address"])),
    ("late_exchange", _one("exchange", late=True)), ("late_modify_items", _one("modify_items", late=True)),
    ("late_return", _one("return", late=True)),
    ("identity_mistake", _identity(_one("cancel"))), ("identity_other", _with_other_customer(_one("return"))),
    ("multi_cancel_cancel", _multi(["cancel", "cancel"])), ("multi_info_cancel", _multi(["info_status", "cancel"])),
]


def generate_tasks(data: dict[str, dict], n: int, seed: int, *, snapshot: str, test_fraction: float = 0.2,
                   categories: list[str] | None = None) -> list[Task]:
    """`n` tasks cycling through the categories (all by default), deterministic for (data, seed).

    A category named k times in `categories` takes k slots of the cycle (a weighted mix); the
    cycle keeps the schedule's order, so a mix without repeats gives the same tasks as before."""
    store = G.Store(data)
    known = [c for c, _ in SCHEDULE]
    unknown = sorted(set(categories or ()) - set(known))
    if unknown or categories == []:
        raise ValueError(f"no such categories: {unknown or categories}; known: {known}")
    schedule = [(name, b) for name, b in SCHEDULE
                for _ in range(1 if categories is None else categories.count(name))]
    users = sorted(store.users)
    tasks: list[Task] = []
    for i in range(n):
        name, builder = schedule[i % len(schedule)]
        rng = random.Random(f"{seed}:{i}:{name}")
        for _attempt in range(200):
            uid = rng.choice(users)
            built = builder(store, uid, rng, G.Used())
            if built is None:
                continue
            goals, tags = built
            mistake = "identity_mistake" in tags
            customer = _customer(store, uid, rng, identity_mistake=mistake)
            tasks.append(assemble(task_id=f"{snapshot}-s{seed}-{i:05d}-{name}", snapshot=snapshot,
                                  customer=customer, goals=goals, split=split_of(uid, seed, test_fraction),
                                  tags=[*tags, f"category:{name}"]))
            break
        else:
            raise ValueError(f"store has no customer for category {name!r} (task {i})")
    return tasks
