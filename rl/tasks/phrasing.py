"""How customers and agents put store records into words.

Shared by the generator (what a customer says about an item, a payment method or an address),
the scripted simulator and the oracle (how a proposed action is described), so the same record
is always described the same way and a description can be matched back to a goal.
"""

from __future__ import annotations

import re
from typing import Any

KIND_VERB = {
    "cancel": "cancel",
    "modify_address": "change the shipping address of",
    "modify_payment": "change the payment method of",
    "modify_items": "modify items in",
    "user_address": "update my default address",
    "return": "return items from",
    "exchange": "exchange items from",
}
# A proposal for a goal of this kind must mention one of these words (lowercased) ...
KIND_TERMS: dict[str, tuple[str, ...]] = {
    "cancel": ("cancel",),
    "modify_address": ("address",),
    "modify_payment": ("payment",),
    "modify_items": ("modify", "swap", "switch", "change", "replace"),
    "user_address": ("address",),
    "return": ("return",),
    "exchange": ("exchange",),
}
# ... and none of these.
KIND_EXCLUDE: dict[str, tuple[str, ...]] = {
    "cancel": ("exchange", "return"),
    "modify_address": ("cancel",),
    "modify_payment": ("cancel",),
    "modify_items": ("cancel", "address"),
    "user_address": ("cancel",),
    "return": ("cancel", "exchange"),
    "exchange": ("cancel",),
}


def options_text(options: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in options.items())


def item_text(item: dict[str, Any]) -> str:
    """'the Water Bottle (capacity: 1000ml, color: blue)'."""
    opts = options_text(item.get("options", {}))
    return f"the {item['name']}" + (f" ({opts})" if opts else "")


def join_and(texts: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]


def items_text(items: list[dict[str, Any]]) -> str:
    return join_and([item_text(i) for i in items])


PAYMENT_SOURCES = ("credit_card", "paypal", "gift_card")


def payment_description(pm: dict[str, Any]) -> str:
    """A payment method record in words, whoever speaks: 'Visa card ending in 1234', 'PayPal
    account', 'gift card' ('payment method' for a source the store does not have)."""
    source = pm.get("source")
    if source == "credit_card":
        return f"{str(pm.get('brand', 'credit')).title()} card ending in {pm.get('last_four')}"
    if source == "paypal":
        return "PayPal account"
    if source == "gift_card":
        return "gift card"
    return "payment method"


def payment_text(pm: dict[str, Any], n_gift_cards: int = 1) -> str:
    """How a customer names a payment method (a card by brand and last four digits)."""
    if pm.get("source") == "gift_card" and n_gift_cards > 1:
        return f"my gift card {pm['id']}"
    if pm.get("source") in PAYMENT_SOURCES:
        return "my " + payment_description(pm)
    return f"payment method {pm.get('id')}"


def item_terms(items: list[dict[str, Any]]) -> list[str]:
    """Words that identify the items of a return or a swap in an agent's proposal: their product
    names. A customer who asked to return the kettle says no to returning the dumbbells."""
    return list(dict.fromkeys(str(i["name"]) for i in items))


def payment_terms(pm: dict[str, Any]) -> list[str]:
    """Words that identify a payment method in an agent's proposal."""
    source = pm.get("source")
    if source == "credit_card":
        return [str(pm.get("last_four"))]
    if source == "paypal":
        return ["paypal"]
    return ["gift card"]


# The order a customer says an address in (`address_text`): "4149 Sunset Boulevard, Apt 3, Portland, OR 97217, USA".
ADDRESS_SAID_ORDER = ("address1", "address2", "city", "state", "zip", "country")


def in_said_order(arguments: dict[str, Any]) -> dict[str, Any]:
    """`arguments` with an address's fields in the order a customer says them, where the first of
    them stood (the other arguments keep their places): a call written this way copies the
    customer's phrases one after the other."""
    fields = [k for k in ADDRESS_SAID_ORDER if k in arguments]
    if not fields:
        return dict(arguments)
    out: dict[str, Any] = {}
    for k, v in arguments.items():
        if k not in ADDRESS_SAID_ORDER:
            out[k] = v
        elif not any(f in out for f in fields):
            out.update((f, arguments[f]) for f in fields)
    return out


def address_text(a: dict[str, Any]) -> str:
    line = a["address1"] + (f", {a['address2']}" if a.get("address2") else "")
    return f"{line}, {a['city']}, {a['state']} {a['zip']}, {a['country']}"


def order_ref(order_id: str) -> str:
    return order_id if order_id.startswith("#") else f"#{order_id}"


def normalize(text: str) -> str:
    return " ".join(text.lower().replace(",", "").split())


def mentions(message: str, term: str) -> bool:
    """Whether `message` mentions `term` (case-insensitive, order ids with or without '#')."""
    m = message.lower()
    t = term.lower()
    if t.startswith("#"):
        return t[1:] in m
    return t in m or t in m.replace(",", "")


def _names_word(text: str, word: str) -> bool:
    """Whether a word starts in `text` ('cancel' in 'cancelled', not in 'uncancelable')."""
    return re.search(r"(?<![a-z])" + re.escape(word), text) is not None


def proposal_matches(message: str, kind: str, terms: list[str], *, kind_text: str | None = None) -> bool:
    """Does an agent's proposal describe a goal of `kind` with `terms` (order id, payment...)?

    The kind is read from `kind_text` (default: the message): the message with the descriptions of
    the records it quotes blanked out, so an item's "noise cancelling" option is not a cancellation."""
    k = (message if kind_text is None else kind_text).lower()
    if kind in KIND_TERMS:
        if not any(_names_word(k, w) for w in KIND_TERMS[kind]):
            return False
        if any(_names_word(k, w) for w in KIND_EXCLUDE.get(kind, ())):
            return False
    return all(mentions(message, t) for t in terms)


def proposes_request(message: str, kind: str, order_id: str | None, *, kind_text: str | None = None) -> bool:
    """Does an agent's proposal name the customer's request: its `kind` of action, on its order
    when it has one (what a goal shift waits for, rl/simulator/scripted.py)? Unlike a full match it
    does not ask for the request's distinctive terms (a new address, a payment method)."""
    return proposal_matches(message, kind, [order_ref(order_id)] if order_id else [], kind_text=kind_text)
