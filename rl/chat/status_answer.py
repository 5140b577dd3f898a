"""Which status free text may give an order: one its lookups showed. The teacher answers a status
question with "Order #W... is currently delivered; its tracking number is ..." (rl/policies/wording.py
`answer`); on task seed 41 the cold start wrote "delivered" for orders whose record said "cancelled"
(`dev-41`, bench/results/README.md). With `status_answers` (rl/chat/views.py), the word after "is
currently" in free text is the status of an order the conversation looked up; with
`refusals_by_status`, the word after "is already" (the teacher's refusal) is the named order's status,
and never "pending" (section below).

`open_slot` says whether free text so far is at or inside such a slot and returns what the slot
holds so far (from the space after "is currently"); `allowed_tokens` lists the tokens that keep it
on the way to a shown status, or end it with one."""

from __future__ import annotations

import re

TRIGGER = "is currently"
LOOKBACK = len(TRIGGER) + 40  # longer than any status and the space before it


def _fits(value: str, statuses: frozenset[str]) -> bool:
    """Whether `value` (text after the trigger) begins " STATUS" for a shown status, or has written
    one whole and gone on past a word's end ("delivered;", not "deliveredly")."""
    for s in statuses:
        whole = " " + s
        if whole.startswith(value):
            return True
        if value.startswith(whole) and not (value[len(whole)].isalnum() or value[len(whole)] in "-_"):
            return True
    return False


def open_slot(free: str, statuses: frozenset[str]) -> str | None:
    """What free text `free` has written of a status slot (from the trigger's end: "", " ", " deliv"),
    or None when it is in none: no trigger, or the status after it is whole or not a shown one."""
    tail = free[-LOOKBACK:]
    at = tail.rfind(TRIGGER)
    return _begun(tail[at + len(TRIGGER):], statuses) if at >= 0 else None


def _begun(value: str, statuses: frozenset[str]) -> str | None:
    """`value` (what follows a trigger) when it is on its way to " STATUS" for one of `statuses` and
    not yet whole, else None."""
    return value if any((" " + s).startswith(value) and value != " " + s for s in statuses) else None


def allowed_tokens(value: str, statuses: frozenset[str], texts: list[str | None]) -> list[int]:
    """The token ids (by their `texts`) that keep a slot holding `value` on its way to a shown status."""
    return [i for i, t in enumerate(texts) if t and _fits(value + t, statuses)]


# ------------------------------------------------------------------ refusals
# The teacher refuses a cancellation with "I'm afraid I can't: order #W... is already delivered, and
# only pending orders can be cancelled" (rl/tasks/generator.py), only for an order that is not
# pending. After GRPO, one seed of `dev-41` said it of pending orders, after the customer's yes to its
# own proposal. With `refusals_by_status`, the word after "is already" is the status the named
# order's lookup showed, never "pending"; for an order with no other status the phrase is not written.
REFUSAL = "is already"
NOT_REFUSED = "pending"
_ORDER_BEFORE = re.compile(r"(<order_\d+>|#W\d+)\s*$")


def refusable(before: str, orders: dict[str, str]) -> frozenset[str]:
    """The statuses a refusal may give the order named at the end of `before` (its lookup's, else
    any looked-up order's), less "pending"."""
    m = _ORDER_BEFORE.search(before)
    named = {orders[m.group(1)]} if m and m.group(1) in orders else set(orders.values())
    return frozenset(named - {NOT_REFUSED})


def refusal_slot(free: str, orders: dict[str, str]) -> tuple[str, frozenset[str]] | None:
    """What free text `free` has written of a refusal's status slot and the statuses it may hold, or
    None when it is in none (as `open_slot`)."""
    tail = free[-LOOKBACK:]
    at = tail.rfind(REFUSAL)
    if at < 0:
        return None
    statuses = refusable(tail[:at], orders)
    value = _begun(tail[at + len(REFUSAL):], statuses)
    return (value, statuses) if value is not None else None


def refusal_done(free: str, orders: dict[str, str]) -> int | None:
    """How much of "is already" `free` ends with (0: none of it), when the order it names has no
    status a refusal may give it (then no token may complete the phrase); None when it has one."""
    tail = free[-LOOKBACK:]
    done = next((k for k in range(len(REFUSAL) - 1, 0, -1) if tail.endswith(REFUSAL[:k])), 0)
    return None if refusable(tail[: len(tail) - done], orders) else done


def completing(done: int, texts: list[str | None]) -> list[int]:
    """The token ids that would complete "is already" after text ending with its first `done` characters."""
    return [i for i, t in enumerate(texts) if t and REFUSAL in REFUSAL[:done] + t]
