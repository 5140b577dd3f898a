"""What the oracle says: an action described for confirmation, a report after it, an answer.

Descriptions use the records the agent has already looked up in this conversation (item names and
options from order and product details, payment methods from the user's details), so the text is
what a careful human agent would say, and it names what the scripted customer checks (order id,
kind of change, payment method, new address).
"""

from __future__ import annotations

import json
from typing import Any

from rl.chat.proposal_template import REASON_LEAD
from rl.chat.views import item_mention, payment_mention
from rl.tasks.phrasing import address_text, items_text, join_and, order_ref, payment_description, payment_text
from rl.tasks.schema import Action, Goal

VERB = {"exchange": "exchange", "modify_items": "change", "return": "return"}
Message = dict[str, Any]


def _records(messages: list[Message]) -> tuple[dict[str, dict], dict[str, dict]]:
    """item id -> {name, options}; payment method id -> record, from tool results so far."""
    items: dict[str, dict] = {}
    pms: dict[str, dict] = {}
    for m in messages:
        if m.get("role") != "tool":
            continue
        try:
            rec = json.loads(m.get("content") or "")
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        for it in rec.get("items", []) if isinstance(rec.get("items"), list) else []:
            if isinstance(it, dict) and "item_id" in it:
                items[it["item_id"]] = {"name": it.get("name", "item"), "options": it.get("options", {})}
        if isinstance(rec.get("variants"), dict):
            for vid, v in rec["variants"].items():
                items[vid] = {"name": rec.get("name", "item"), "options": v.get("options", {})}
        if isinstance(rec.get("payment_methods"), dict):
            pms.update(rec["payment_methods"])
    return items, pms


def _items(ids: list[str], items: dict[str, dict], options: bool = True, refs: bool = False) -> str:
    """The items `ids` as a proposal names them: 'the Water Bottle (capacity: 1000ml, color: blue)',
    'the Water Bottle' without `options`, or 'the Water Bottle (item 1234567890)' with `refs` (the
    mention a view with `item_refs` shows as the item's reference)."""
    if not ids:
        return "no items"
    if refs:
        return join_and([f"the {item_mention(items[i]['name'], i)}" if i in items else f"item {i}" for i in ids])
    known = [items.get(i, {"name": f"item {i}", "options": {}}) for i in ids]
    if not options:
        known = [{**i, "options": {}} for i in known]
    return items_text(known)


def _pay(pm_id: str, pms: dict[str, dict], refs: bool = False) -> str:
    """A payment method as a proposal names it: 'your Visa card ending in 1234', a gift card with its
    id; with `refs`, every method with its id ('your PayPal account (paypal_7732922)'), the mention a
    view with `payment_refs` shows as the method's reference."""
    pm = pms.get(pm_id)
    if pm is None:
        return f"payment method {pm_id}"
    if refs:
        return "your " + payment_mention(payment_description(pm), pm_id)
    n_gift = sum(1 for p in pms.values() if p.get("source") == "gift_card")
    text = payment_text(pm, n_gift).replace("my ", "your ", 1)
    return text + (f" ({pm_id})" if pm.get("source") == "gift_card" else "")


def describe(action: Action, messages: list[Message], item_options: bool = True, item_refs: bool = False,
             payment_refs: bool = False) -> str:
    """`action` in words, from the records `messages` showed. Without `item_options`, items are named
    by their product alone: a view that shows an order's items by name only (the compact view) gives
    a model nothing to copy their options from. With `item_refs`, the items an action takes away
    are named by product and item id (`_items`); the new variants of a swap keep their options. With
    `payment_refs`, payment methods are named with their ids (`_pay`)."""
    items, pms = _records(messages)
    a = action.arguments
    ref = order_ref(str(a.get("order_id", "")))
    n = action.name
    if n == "cancel_pending_order":
        return f"cancel order {ref} {REASON_LEAD}{a.get('reason')}'; the refund goes to the original payment"
    if n == "modify_pending_order_address":
        return f"change the shipping address of order {ref} to {address_text(a)}"
    if n == "modify_pending_order_payment":
        return f"change the payment method of order {ref} to {_pay(a['payment_method_id'], pms, payment_refs)}"
    if n == "modify_user_address":
        return f"update your default address to {address_text(a)}"
    pay = _pay(str(a.get("payment_method_id")), pms, payment_refs)
    old = _items(list(a.get("item_ids", [])), items, item_options, item_refs)
    if n == "return_delivered_order_items":
        return f"return {old} from order {ref}, with the refund going to {pay}"
    # the new variants differ from the old items only in their options: those are always named
    new = _items(list(a.get("new_item_ids", [])), items)
    if n == "modify_pending_order_items":
        return f"modify order {ref}: swap {old} for {new}, settling any price difference with {pay}"
    if n == "exchange_delivered_order_items":
        return f"exchange {old} from order {ref} for {new}, settling any price difference with {pay}"
    return f"run {n} with {json.dumps(a)}"


def proposal(action: Action, messages: list[Message], item_options: bool = True, item_refs: bool = False,
             payment_refs: bool = False) -> str:
    """The request for the customer's yes before `action` (the cold-start teacher's wrong proposals
    say the same, so that only the action differs)."""
    return f"To confirm, I will {describe(action, messages, item_options, item_refs, payment_refs)}. " \
        "Do you confirm (yes/no)?"


def refusal(goal: Goal, messages: list[Message], payment_refs: bool = False) -> str:
    """What the oracle cannot do, in a few words."""
    a = goal.action
    if a is None:
        return "do that"
    ref = order_ref(str(a.arguments.get("order_id", "")))
    if a.name == "cancel_pending_order":
        return f"cancel order {ref}"
    if a.name == "return_delivered_order_items":
        _, pms = _records(messages)
        pay = _pay(str(a.arguments.get("payment_method_id")), pms, payment_refs)
        return f"send the refund for order {ref} to {pay}"
    return describe(a, messages, payment_refs=payment_refs)


def report(goal: Goal, messages: list[Message]) -> str:
    a = goal.action
    if a is None:
        return "Done."
    ref = order_ref(str(a.arguments.get("order_id", "")))
    return {
        "cancel_pending_order": f"Order {ref} has been cancelled.",
        "modify_pending_order_address": f"The shipping address of order {ref} has been updated.",
        "modify_pending_order_payment": f"The payment method of order {ref} has been updated.",
        "modify_pending_order_items": f"The items of order {ref} have been modified.",
        "modify_user_address": "Your default address has been updated.",
        "return_delivered_order_items": f"The return for order {ref} has been requested; you will receive an "
                                        "email with instructions.",
        "exchange_delivered_order_items": f"The exchange for order {ref} has been requested; you will receive an "
                                          "email with instructions.",
    }.get(a.name, "Done.")


def answer(goal: Goal) -> str:
    answers = ", ".join(goal.answer)
    say = goal.say.lower()
    if "status" in say and goal.order_id:
        if len(goal.answer) == 2 and "tracking" in say:
            return (f"Order {order_ref(goal.order_id)} is currently {goal.answer[0]}; "
                    f"its tracking number is {goal.answer[1]}.")
        return f"Order {order_ref(goal.order_id)} is currently {answers}."
    if say.startswith("how many") or " how many " in say:
        return f"There are {answers} options available right now."
    return f"Here is what I found: {answers}."
