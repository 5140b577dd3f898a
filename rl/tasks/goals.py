"""Goal builders: one customer goal (with its gold write, lookups and words) from store records.

Every builder reads the store data (tau JSON shape) and returns a `Goal` whose action is valid on
the *initial* store by construction (right status, items in the order, available variants of the
same product, a payment method the customer owns and a gift card that covers the amount), or None
when the customer has nothing it could apply to. The generator composes goals into tasks and a
test replays every gold plan through the real tools.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from rl.tasks.phrasing import (
    address_text,
    item_terms,
    item_text,
    items_text,
    options_text,
    order_ref,
    payment_terms,
    payment_text,
)
from rl.tasks.schema import Action, Goal

REASONS = {"no longer needed": "I no longer need it.", "ordered by mistake": "I ordered it by mistake."}
STREETS = ["Maple Avenue", "Cedar Lane", "Oak Street", "Hillcrest Road", "Lakeview Drive", "Pine Court",
           "River Road", "Sunset Boulevard", "Elm Street", "Willow Way"]
CITIES = [("Austin", "TX", "787"), ("Denver", "CO", "802"), ("Seattle", "WA", "981"), ("Boston", "MA", "021"),
          ("Phoenix", "AZ", "850"), ("Columbus", "OH", "432"), ("Portland", "OR", "972")]


@dataclass
class Store:
    """Indexes over one store's data that the builders need."""

    data: dict[str, dict[str, Any]]
    orders_by_user: dict[str, list[dict]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for o in self.data["orders"].values():
            self.orders_by_user.setdefault(o["user_id"], []).append(o)

    @property
    def users(self) -> dict[str, dict]:
        return self.data["users"]

    def product(self, pid: str) -> dict:
        return self.data["products"][pid]

    def orders(self, uid: str, *statuses: str) -> list[dict]:
        return [o for o in self.orders_by_user.get(uid, []) if not statuses or o["status"] in statuses]

    def pm(self, uid: str, pm_id: str) -> dict:
        return self.users[uid]["payment_methods"][pm_id]

    def gift_cards(self, uid: str) -> list[dict]:
        return [p for p in self.users[uid]["payment_methods"].values() if p["source"] == "gift_card"]

    def pay_text(self, uid: str, pm_id: str) -> str:
        return payment_text(self.pm(uid, pm_id), len(self.gift_cards(uid)))


@dataclass
class Used:
    """Records a task already touches, so its goals never interfere."""

    orders: set[str] = field(default_factory=set)
    gift_cards: set[str] = field(default_factory=set)
    user_address: bool = False


def _free(orders: list[dict], used: Used) -> list[dict]:
    return [o for o in orders if o["order_id"] not in used.orders]


def _original_pm(order: dict) -> str:
    return order["payment_history"][0]["payment_method_id"]


def _alternatives(store: Store, item: dict) -> list[dict]:
    """Available variants of the item's product other than the item itself."""
    variants = store.product(item["product_id"])["variants"].values()
    return [v for v in variants if v["available"] and v["item_id"] != item["item_id"]]


def _single_items(order: dict) -> list[dict]:
    ids = [i["item_id"] for i in order["items"]]
    return [i for i in order["items"] if ids.count(i["item_id"]) == 1]


def _difference_payment(store: Store, uid: str, order: dict, diff: float, used: Used) -> str | None:
    """Who pays a price difference: the original method unless it is a gift card that cannot."""
    candidates = [_original_pm(order)] + [p for p in store.users[uid]["payment_methods"] if p != _original_pm(order)]
    for pm_id in candidates:
        if pm_id not in store.users[uid]["payment_methods"]:
            continue
        pm = store.pm(uid, pm_id)
        if pm["source"] != "gift_card":
            return pm_id
        if pm_id not in used.gift_cards and float(pm.get("balance", 0)) >= max(diff, 0) + 0.01:
            used.gift_cards.add(pm_id)
            return pm_id
    return None


def new_address(rng: random.Random) -> dict[str, str]:
    city, state, zip3 = rng.choice(CITIES)
    return {
        "address1": f"{rng.randint(10, 9999)} {rng.choice(STREETS)}",
        "address2": rng.choice(["", f"Apt {rng.randint(1, 40)}", f"Suite {rng.randint(100, 999)}"]),
        "city": city, "country": "USA", "state": state, "zip": f"{zip3}{rng.randint(10, 99)}",
    }


def _order_goal(gid: str, kind: str, order: dict, say: str, action: Action, lookups: list[Action],
                details: dict[str, str], terms: list[str], rng: random.Random, **kw: Any) -> Goal:
    ref = order_ref(order["order_id"])
    with_id = rng.random() < 0.6
    details = {"order_id": f"It's order {ref}.", **details}
    return Goal(id=gid, kind=kind, outcome=kw.pop("outcome", "act"),
                say=say.format(order=f"my order {ref}" if with_id else "one of my orders"),
                upfront=["order_id"] if with_id else [], details=details, action=action,
                lookups=[Action(name="get_order_details", arguments={"order_id": order["order_id"]}), *lookups],
                order_id=order["order_id"], confirm_terms=[ref, *terms], **kw)


def cancel(store: Store, uid: str, rng: random.Random, used: Used, gid: str, order: dict | None = None) -> Goal | None:
    order = order or _pick(rng, _free(store.orders(uid, "pending"), used))
    if order is None:
        return None
    reason = rng.choice(sorted(REASONS))
    used.orders.add(order["order_id"])
    act = Action(name="cancel_pending_order", arguments={"order_id": order["order_id"], "reason": reason})
    return _order_goal(gid, "cancel", order, "I'd like to cancel {order}.", act, [],
                       {"reason": REASONS[reason]}, [], rng)


def modify_address(store: Store, uid: str, rng: random.Random, used: Used, gid: str,
                   order: dict | None = None) -> Goal | None:
    order = order or _pick(rng, _free(store.orders(uid, "pending"), used))
    if order is None:
        return None
    addr = new_address(rng)
    used.orders.add(order["order_id"])
    act = Action(name="modify_pending_order_address", arguments={"order_id": order["order_id"], **addr})
    return _order_goal(gid, "modify_address", order, "I need to change the shipping address of {order}.",
                       act, [], {"address": f"Please ship it to {address_text(addr)}."}, [addr["address1"]], rng)


def modify_payment(store: Store, uid: str, rng: random.Random, used: Used, gid: str,
                   order: dict | None = None) -> Goal | None:
    pending = [o for o in _free(store.orders(uid, "pending"), used) if len(o["payment_history"]) == 1]
    order = order if order is not None and len(order["payment_history"]) == 1 else _pick(rng, pending)
    if order is None:
        return None
    amount = float(order["payment_history"][0]["amount"])
    options = [p for pid, p in store.users[uid]["payment_methods"].items() if pid != _original_pm(order) and (
        p["source"] != "gift_card" or (pid not in used.gift_cards and float(p.get("balance", 0)) >= amount))]
    if not options:
        return None
    pm = rng.choice(options)
    if pm["source"] == "gift_card":
        used.gift_cards.add(pm["id"])
    used.orders.add(order["order_id"])
    act = Action(name="modify_pending_order_payment", arguments={"order_id": order["order_id"],
                                                                  "payment_method_id": pm["id"]})
    return _order_goal(gid, "modify_payment", order, "I want to pay for {order} with a different payment method.",
                       act, [Action(name="get_user_details", arguments={"user_id": uid})],
                       {"payment": f"Please use {store.pay_text(uid, pm['id'])}."}, payment_terms(pm), rng)


def _item_swaps(store: Store, order: dict, rng: random.Random, n: int) -> list[tuple[dict, dict]]:
    swappable = [i for i in _single_items(order) if _alternatives(store, i)]
    rng.shuffle(swappable)
    return [(i, rng.choice(_alternatives(store, i))) for i in swappable[:n]]


def _swap_goal(kind: str, store: Store, uid: str, rng: random.Random, used: Used, gid: str,
               order: dict | None, n_items: int, late: bool) -> Goal | None:
    status = "pending" if kind == "modify_items" else "delivered"
    orders = [order] if order is not None else list(_free(store.orders(uid, status), used))
    rng.shuffle(orders)
    for o in orders:
        swaps = _item_swaps(store, o, rng, n_items)
        if len(swaps) < (2 if late else 1):
            continue
        diff = round(sum(float(new["price"]) - float(old["price"]) for old, new in swaps), 2)
        pm_id = _difference_payment(store, uid, o, diff, used)
        if pm_id is None:
            continue
        used.orders.add(o["order_id"])
        tool = "modify_pending_order_items" if kind == "modify_items" else "exchange_delivered_order_items"
        args = {"order_id": o["order_id"], "item_ids": [old["item_id"] for old, _ in swaps],
                "new_item_ids": [new["item_id"] for _, new in swaps], "payment_method_id": pm_id}
        wishes = [f"{item_text(old)} for the one with {options_text(new['options'])}" for old, new in swaps]
        early, extra = (wishes[:-1], wishes[-1]) if late else (wishes, None)
        verb = "change" if kind == "modify_items" else "exchange"
        stated = None
        if late:
            stated = Action(name=tool, arguments={**args, "item_ids": args["item_ids"][:-1],
                                                  "new_item_ids": args["new_item_ids"][:-1]})
        lookups = [Action(name="get_product_details", arguments={"product_id": pid})
                   for pid in dict.fromkeys(old["product_id"] for old, _ in swaps)]
        lookups.append(Action(name="get_user_details", arguments={"user_id": uid}))
        pay = store.pay_text(uid, pm_id)
        return _order_goal(
            gid, kind, o, f"I want to {verb} an item in {{order}}.", Action(name=tool, arguments=args), lookups,
            {"items": f"I'd like to {verb} " + "; and ".join(early) + ".",
             "payment": f"Use {pay} for any price difference."},
            item_terms([old for old, _ in swaps]), rng,
            late=(f"Oh, one more: I'd also like to {verb} {extra}." if extra else None),
            stated_action=stated)
    return None


def modify_items(store: Store, uid: str, rng: random.Random, used: Used, gid: str, order: dict | None = None,
                 late: bool = False) -> Goal | None:
    return _swap_goal("modify_items", store, uid, rng, used, gid, order, 2 if late else 1, late)


def exchange(store: Store, uid: str, rng: random.Random, used: Used, gid: str, order: dict | None = None,
             late: bool = False) -> Goal | None:
    return _swap_goal("exchange", store, uid, rng, used, gid, order, 2 if late else rng.choice([1, 1, 2]), late)


def return_items(store: Store, uid: str, rng: random.Random, used: Used, gid: str, order: dict | None = None,
                 late: bool = False, pm_id: str | None = None) -> Goal | None:
    order = order or _pick(rng, [o for o in _free(store.orders(uid, "delivered"), used)
                                 if len(_single_items(o)) >= (2 if late else 1)])
    if order is None or len(_single_items(order)) < (2 if late else 1):
        return None
    items = _single_items(order)
    rng.shuffle(items)
    items = items[: (2 if late else rng.choice([1, 1, 2]))]
    if pm_id is None:
        gift = [g["id"] for g in store.gift_cards(uid)]
        pm_id = rng.choice([_original_pm(order)] * 2 + gift)
    if pm_id not in store.users[uid]["payment_methods"]:
        return None
    used.orders.add(order["order_id"])
    ids = [i["item_id"] for i in items]
    act = Action(name="return_delivered_order_items",
                 arguments={"order_id": order["order_id"], "item_ids": ids, "payment_method_id": pm_id})
    early = items[:-1] if late else items
    stated = Action(name=act.name, arguments={**act.arguments, "item_ids": ids[:-1]}) if late else None
    return _order_goal(
        gid, "return", order, "I want to return something from {order}.", act,
        [Action(name="get_user_details", arguments={"user_id": uid})],
        {"items": f"I want to return {items_text(early)}.",
         "payment": f"Please refund {store.pay_text(uid, pm_id)}."},
        [*item_terms(items), *payment_terms(store.pm(uid, pm_id))], rng,
        late=(f"Oh, and I also want to return {item_text(items[-1])}." if late else None), stated_action=stated)


def user_address(store: Store, uid: str, rng: random.Random, used: Used, gid: str, **_: Any) -> Goal | None:
    if used.user_address:
        return None
    used.user_address = True
    addr = new_address(rng)
    return Goal(id=gid, kind="user_address", outcome="act", say="I moved and need to update my default address.",
                details={"address": f"My new address is {address_text(addr)}."},
                action=Action(name="modify_user_address", arguments={"user_id": uid, **addr}),
                lookups=[Action(name="get_user_details", arguments={"user_id": uid})],
                confirm_terms=[addr["address1"]])


def _pick(rng: random.Random, xs: list) -> Any:
    return rng.choice(xs) if xs else None


ACT_BUILDERS = {
    "cancel": cancel, "modify_address": modify_address, "modify_payment": modify_payment,
    "modify_items": modify_items, "user_address": user_address, "return": return_items, "exchange": exchange,
}
