"""Which status free text may give an order: one its lookups showed. The teacher answers a status
question with "Order #W... is currently delivered; its tracking number is ..." (rl/policies/wording.py
`answer`); on task seed 41 the cold start wrote "delivered" for orders whose record said "cancelled"
(`dev-41`, bench/results/README.md). With `status_answers` (rl/chat/views.py), the word after "is
currently" in free text is the status of an order the conversation looked up.

`open_slot` says whether free text so far is at or inside such a slot and returns what the slot
holds so far (from the space after "is currently"); `allowed_tokens` lists the tokens that keep it
on the way to a shown status, or end it with one."""

from __future__ import annotations

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
    if at < 0 or not statuses:
        return None
    value = tail[at + len(TRIGGER):]
    if any((" " + s).startswith(value) and value != " " + s for s in statuses):
        return value
    return None


def allowed_tokens(value: str, statuses: frozenset[str], texts: list[str | None]) -> list[int]:
    """The token ids (by their `texts`) that keep a slot holding `value` on its way to a shown status."""
    return [i for i, t in enumerate(texts) if t and _fits(value + t, statuses)]
