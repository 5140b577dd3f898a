"""How the scripted customer reads an agent's message: is it a question (about which facts), a
request for confirmation, a refusal, a report that an account was not found, or a check that the
list of items is complete. Plain keyword rules, so they are fast, deterministic and testable.
"""

from __future__ import annotations

import re

CONFIRM_CUES = ("confirm", "proceed", "go ahead", "shall i", "should i", "would you like me to",
                "do you want me to", "is that correct", "yes/no", "is this correct", "okay to")
REFUSAL_CUES = ("sorry", "cannot", "can't", "can not", "unable", "not able", "not allowed", "not possible",
                "only pending", "only delivered", "only help", "isn't possible", "is not possible", "won't be able")
NOT_FOUND_CUES = ("couldn't find", "could not find", "not found", "no account", "unable to find",
                  "can't find", "cannot find", "didn't find", "no user")
COMPLETE_CUES = ("all the items", "any other item", "anything else to", "any other items", "is that all",
                 "complete list", "all items", "everything you want", "other items you", "more items")
SLOT_CUES: dict[str, tuple[str, ...]] = {
    "email": ("email",),
    "name_zip": ("zip", "postal", "your name", "full name", "first name", "last name"),
    "order_id": ("order id", "order number", "which order", "order #", "the order"),
    "items": ("which item", "what item", "which items", "what items", "which product", "item", "option",
              "color", "size", "variant"),
    "reason": ("reason", "why"),
    "payment": ("payment", "refund", "pay ", "card", "paypal", "gift"),
    "address": ("new address", "shipping address", "which address", "what address", "the address",
                "address would", "address you", "address to", "default address"),
    "product": ("which product", "product"),
}


def lower(text: str) -> str:
    return text.lower()


def asks_question(text: str) -> bool:
    t = lower(text)
    return "?" in t or any(w in t for w in ("please provide", "could you", "can you", "let me know", "tell me"))


def offers_help(text: str) -> bool:
    """'How can I help you?' / 'Anything else?': an open question, not a request for a fact."""
    t = lower(text)
    return any(c in t for c in ("help", "assist", "anything else", "what can i do"))


def asks_confirmation(text: str) -> bool:
    t = lower(text)
    return "?" in t and any(c in t for c in CONFIRM_CUES)


def refuses(text: str) -> bool:
    t = lower(text)
    return any(c in t for c in REFUSAL_CUES)


def says_not_found(text: str) -> bool:
    t = lower(text)
    return any(c in t for c in NOT_FOUND_CUES)


def asks_completeness(text: str) -> bool:
    t = lower(text)
    return any(c in t for c in COMPLETE_CUES)


def asked_slots(text: str) -> list[str]:
    """Which facts a question asks for, in a fixed order."""
    t = lower(text).replace("email address", "email")
    if not asks_question(text):
        return []
    return [slot for slot, cues in SLOT_CUES.items() if any(c in t for c in cues)]


_WORD = re.compile(r"[a-z0-9#.@_-]+")


def said(text: str, answer: str) -> bool:
    """Whether `answer` appears in `text` as tau does it (lowercase, commas removed)."""
    return answer.lower() in text.lower().replace(",", "")
