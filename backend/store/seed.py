"""A synthetic store of any size, deterministic by seed, in tau-bench retail's JSON shape.

`generate_store(seed, users)` returns `{"users", "orders", "products"}` exactly as
`backend.store.tau_data.load_store` takes it and `export_store` gives it back: customers with
names, emails, addresses and one to four payment methods (credit cards, PayPal, gift cards
with balances); a catalogue of every product type in `seed_catalog` with variants (options,
cents-exact prices, availability); and orders in every status a store goes through -
`pending`, `pending (item modified)`, `processed`, `delivered`, `cancelled` (with its refund
entries and `cancel_reason`), `return requested` and `exchange requested` - whose payment
history always matches the items (payments minus refunds equal the items' total, zero for a
cancelled order). Money is computed in integer cents, so every amount is exact to the cent.
The same seed and size always give the identical store.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from backend.store.seed_catalog import (
    CARD_BRANDS,
    CITIES,
    EMAIL_DOMAINS,
    FIRST_NAMES,
    LAST_NAMES,
    PRODUCT_TYPES,
    STREET_NAMES,
    UNIT_KINDS,
    ProductType,
)

Record = dict[str, Any]

ORDER_STATUSES = (
    "pending",
    "pending (item modified)",
    "processed",
    "delivered",
    "cancelled",
    "return requested",
    "exchange requested",
)
_STATUS_WEIGHTS = (34, 4, 12, 30, 10, 5, 5)
CANCEL_REASONS = ("no longer needed", "ordered by mistake")
_ORDERS_PER_USER = ((1, 2, 3, 4, 5, 6), (22, 30, 22, 14, 8, 4))
_ITEMS_PER_ORDER = ((1, 2, 3, 4, 5), (30, 28, 20, 14, 8))
_METHODS_PER_USER = ((1, 2, 3, 4), (35, 35, 20, 10))
_PAYMENT_CHANGED_SHARE = 0.08  # pending / cancelled orders whose payment method was changed once


def money(cents: int) -> float:
    """An amount in cents as tau-bench's float (the nearest double to the exact decimal)."""
    return cents / 100


def cents_of(amount: float) -> int:
    return round(amount * 100)


class _Ids:
    """Unique random digit strings per kind of id."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def new(self, prefix: str, digits: int) -> str:
        while True:
            value = prefix + str(self.rng.randrange(10 ** (digits - 1), 10**digits))
            if value not in self.used:
                self.used.add(value)
                return value


class _StoreBuilder:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(f"muarl-store-seed:{seed}")
        self.ids = _Ids(self.rng)
        self.users: dict[str, Record] = {}
        self.orders: dict[str, Record] = {}
        self.products: dict[str, Record] = {}
        self._available: dict[str, list[Record]] = {}  # product id -> available variants
        self._emails: set[str] = set()
        self._name_zips: set[tuple[str, str, str]] = set()

    # ------------------------------------------------------------------ catalogue

    def build_catalogue(self) -> None:
        for ptype in PRODUCT_TYPES:
            self._add_product(ptype)

    def _add_product(self, ptype: ProductType) -> None:
        rng = self.rng
        axes = [values for _, values in ptype.options]
        combos = list(itertools.product(*axes))
        count = rng.randint(min(4, len(combos)), min(len(combos), 24))
        base = rng.randint(ptype.min_price * 100, ptype.max_price * 100)
        product_id = self.ids.new("", 10)
        variants: dict[str, Record] = {}
        for combo in rng.sample(combos, count):
            item_id = self.ids.new("", 10)
            variants[item_id] = {
                "item_id": item_id,
                "options": {axis: value for (axis, _), value in zip(ptype.options, combo, strict=True)},
                "available": rng.random() < 0.75,
                "price": money(max(100, round(base * rng.uniform(0.82, 1.22)))),
            }
        available = [v for v in variants.values() if v["available"]]
        for v in list(variants.values())[:2]:  # every product can be exchanged: two available variants
            if len(available) >= 2:
                break
            if not v["available"]:
                v["available"] = True
                available.append(v)
        self.products[product_id] = {"name": ptype.name, "product_id": product_id, "variants": variants}
        self._available[product_id] = available

    # ------------------------------------------------------------------ customers

    def add_user(self) -> str:
        rng = self.rng
        while True:
            first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
            city, state, zip3 = rng.choice(CITIES)
            zip_code = f"{zip3}{rng.randrange(100):02d}"
            if (first.lower(), last.lower(), zip_code) not in self._name_zips:
                break
        self._name_zips.add((first.lower(), last.lower(), zip_code))
        user_id = self.ids.new(f"{first.lower()}_{last.lower()}_", 4)
        while True:
            email = f"{first.lower()}.{last.lower()}{rng.randrange(1, 10000)}@{rng.choice(EMAIL_DOMAINS)}"
            if email not in self._emails:
                self._emails.add(email)
                break
        unit = f"{rng.choice(UNIT_KINDS)} {rng.randrange(1, 1000)}" if rng.random() < 0.75 else ""
        self.users[user_id] = {
            "name": {"first_name": first, "last_name": last},
            "address": {
                "address1": f"{rng.randrange(1, 10000)} {rng.choice(STREET_NAMES)}",
                "address2": unit,
                "city": city,
                "country": "USA",
                "state": state,
                "zip": zip_code,
            },
            "email": email,
            "payment_methods": self._payment_methods(),
            "orders": [],
        }
        return user_id

    def _payment_methods(self) -> dict[str, Record]:
        rng = self.rng
        count = rng.choices(*_METHODS_PER_USER)[0]
        sources = [rng.choice(("credit_card", "credit_card", "paypal"))]  # one method that is not a gift card
        sources += rng.choices(("credit_card", "paypal", "gift_card"), weights=(4, 2, 3), k=count - 1)
        methods: dict[str, Record] = {}
        for source in sources:
            pm_id = self.ids.new(f"{source}_", 7)
            if source == "credit_card":
                pm = {"source": source, "brand": rng.choice(CARD_BRANDS),
                      "last_four": f"{rng.randrange(10000):04d}", "id": pm_id}
            elif source == "gift_card":
                whole = rng.random() < 0.4
                cents = rng.randrange(0, 301) * 100 if whole else rng.randrange(0, 30001)
                pm = {"source": source, "balance": money(cents), "id": pm_id}
            else:
                pm = {"source": source, "id": pm_id}
            methods[pm_id] = pm
        return methods

    # ------------------------------------------------------------------ orders

    def add_order(self, user_id: str, status: str) -> None:
        rng = self.rng
        user = self.users[user_id]
        order_id = self.ids.new("#W", 7)
        address = dict(user["address"])
        if rng.random() < 0.1:  # shipped to another address of the customer
            address["address1"] = f"{rng.randrange(1, 10000)} {rng.choice(STREET_NAMES)}"
        items = [self._order_item() for _ in range(rng.choices(*_ITEMS_PER_ORDER)[0])]
        methods = list(user["payment_methods"].values())
        payer = rng.choice(methods)["id"]
        total = sum(cents_of(it["price"]) for it in items)
        history = [_txn("payment", total, payer)]
        changed = status in ("pending", "cancelled") and len(methods) > 1 and rng.random() < _PAYMENT_CHANGED_SHARE
        if changed:
            new_payer = rng.choice([m["id"] for m in methods if m["id"] != payer])
            history += [_txn("payment", total, new_payer), _txn("refund", total, payer)]
            payer = new_payer
        order: Record = {
            "order_id": order_id,
            "user_id": user_id,
            "address": address,
            "items": items,
            "fulfillments": [],
            "status": status,
            "payment_history": history,
        }
        if status == "pending (item modified)":
            self._modify_items(order, methods)
        if status not in ("pending", "pending (item modified)"):
            order["fulfillments"] = self._fulfillments(items)
        if status == "cancelled":
            history.append(_txn("refund", total, payer))
            order["cancel_reason"] = rng.choice(CANCEL_REASONS)
        elif status == "return requested":
            gift_cards = [m["id"] for m in methods if m["source"] == "gift_card"]
            order["return_items"] = sorted(it["item_id"] for it in self._some(items))
            order["return_payment_method_id"] = (
                rng.choice(gift_cards) if gift_cards and rng.random() < 0.3 else payer
            )
        elif status == "exchange requested":
            self._request_exchange(order, methods, payer)
        self.orders[order_id] = order
        user["orders"].append(order_id)

    def _order_item(self) -> Record:
        product = self.products[self.rng.choice(list(self.products))]
        variant = self.rng.choice(list(product["variants"].values()))
        return {
            "name": product["name"],
            "product_id": product["product_id"],
            "item_id": variant["item_id"],
            "price": variant["price"],
            "options": dict(variant["options"]),
        }

    def _some(self, items: list[Record]) -> list[Record]:
        return self.rng.sample(items, self.rng.randint(1, len(items)))

    def _replacement(self, item: Record) -> Record:
        choices = [v for v in self._available[item["product_id"]] if v["item_id"] != item["item_id"]]
        return self.rng.choice(choices)

    def _payer_for(self, methods: list[Record], cents: int, preferred: str) -> str:
        """A method that can pay `cents` (a gift card only with enough balance), `preferred` if it can."""
        def can_pay(m: Record) -> bool:
            return m["source"] != "gift_card" or cents_of(m["balance"]) >= cents

        pref = next(m for m in methods if m["id"] == preferred)
        return preferred if can_pay(pref) else self.rng.choice([m for m in methods if can_pay(m)])["id"]

    def _modify_items(self, order: Record, methods: list[Record]) -> None:
        diff = 0
        for item in self._some(order["items"]):
            new = self._replacement(item)
            diff += cents_of(new["price"]) - cents_of(item["price"])
            item.update(item_id=new["item_id"], price=new["price"], options=dict(new["options"]))
        # a price increase is paid by any method that can; a decrease goes back to the payer
        payer = order["payment_history"][-1]["payment_method_id"]
        if diff > 0:
            payer = self._payer_for(methods, diff, self.rng.choice(methods)["id"])
        if diff:
            order["payment_history"].append(_txn("payment" if diff > 0 else "refund", abs(diff), payer))

    def _request_exchange(self, order: Record, methods: list[Record], payer: str) -> None:
        old = self._some(order["items"])
        new = [self._replacement(it) for it in old]
        diff = sum(cents_of(v["price"]) for v in new) - sum(cents_of(it["price"]) for it in old)
        order["exchange_items"] = sorted(it["item_id"] for it in old)
        order["exchange_new_items"] = sorted(v["item_id"] for v in new)
        order["exchange_payment_method_id"] = self._payer_for(methods, diff, payer)
        order["exchange_price_difference"] = money(diff)

    def _fulfillments(self, items: list[Record]) -> list[Record]:
        ids = [it["item_id"] for it in items]
        parts = [ids]
        if len(ids) > 1 and self.rng.random() < 0.2:
            cut = self.rng.randint(1, len(ids) - 1)
            parts = [ids[:cut], ids[cut:]]
        return [{"tracking_id": [self.ids.new("", 12)], "item_ids": part} for part in parts]


def _txn(kind: str, cents: int, payment_method_id: str) -> Record:
    return {"transaction_type": kind, "amount": money(cents), "payment_method_id": payment_method_id}


def generate_store(seed: int, users: int) -> dict[str, dict[str, Record]]:
    """A synthetic store with `users` customers (at least 1), identical for the same seed and size.

    Every status in `ORDER_STATUSES` occurs at least once (small stores get extra orders).
    """
    if users < 1:
        raise ValueError("a store needs at least one user")
    builder = _StoreBuilder(seed)
    rng = builder.rng
    builder.build_catalogue()
    user_ids = [builder.add_user() for _ in range(users)]
    counts = [rng.choices(*_ORDERS_PER_USER)[0] for _ in user_ids]
    for i in range(max(0, len(ORDER_STATUSES) - sum(counts))):
        counts[i % users] += 1
    statuses = list(ORDER_STATUSES)
    statuses += rng.choices(ORDER_STATUSES, weights=_STATUS_WEIGHTS, k=sum(counts) - len(statuses))
    rng.shuffle(statuses)
    status_iter = iter(statuses)
    for user_id, count in zip(user_ids, counts, strict=True):
        for _ in range(count):
            builder.add_order(user_id, next(status_iter))
    return {"users": builder.users, "orders": builder.orders, "products": builder.products}
