"""What an agent's proposal names, read against the store records the conversation has shown.

The agent quotes records it looked up (products with their options, payment methods, orders), so
the scripted customer reads a proposal *through those records*: `Records.from_conversation` collects
them from the tool results, `Records.outside_descriptions` blanks the record descriptions out of a
text so that words inside them (a "noise cancelling" option, a "switch type") are not read as the
kind of action proposed, and `states_action` says whether a proposal names every argument of an
action and no other record of the same sort (order, item, payment method). A customer that refuses
a proposal stating its own goal's action in full contradicts its goal: that is a simulator failure.
The check is strict on purpose: a proposal worded unlike the records is not recognised, so it can
miss a contradiction, and one that differs from the goal in any record or argument is never taken
for it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from rl.tasks.phrasing import mentions, order_ref, payment_terms
from rl.tasks.schema import Action

Message = dict[str, Any]


@dataclass
class Records:
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # item id -> {name, options}
    payments: dict[str, dict[str, Any]] = field(default_factory=dict)  # payment method id -> record
    orders: set[str] = field(default_factory=set)  # order ids seen

    @classmethod
    def from_conversation(cls, conversation: list[Message]) -> Records:
        rec = cls()
        for m in conversation:
            if m.get("role") != "tool":
                continue
            try:
                data = json.loads(m.get("content") or "")
            except (ValueError, TypeError):
                continue
            if isinstance(data, dict):
                rec._add(data)
        return rec

    def _add(self, data: dict[str, Any]) -> None:
        if isinstance(data.get("order_id"), str):
            self.orders.add(data["order_id"])
        for oid in data.get("orders") or [] if isinstance(data.get("orders"), list) else []:
            self.orders.add(str(oid))
        for it in data.get("items") or [] if isinstance(data.get("items"), list) else []:
            if isinstance(it, dict) and "item_id" in it:
                self.items[str(it["item_id"])] = {"name": str(it.get("name", "")),
                                                  "options": dict(it.get("options") or {})}
        if isinstance(data.get("variants"), dict):
            for vid, v in data["variants"].items():
                if isinstance(v, dict):
                    self.items[str(vid)] = {"name": str(data.get("name", "")), "options": dict(v.get("options") or {})}
        if isinstance(data.get("payment_methods"), dict):
            self.payments.update({str(k): v for k, v in data["payment_methods"].items() if isinstance(v, dict)})

    # ------------------------------------------------------------------ descriptions

    def description_words(self) -> list[str]:
        """Product names, option names and option values, longest first."""
        words = {it["name"] for it in self.items.values()}
        for it in self.items.values():
            for k, v in it["options"].items():
                words.update((str(k), str(v)))
        return sorted((w for w in words if w.strip()), key=len, reverse=True)

    def outside_descriptions(self, text: str) -> str:
        """`text` with every record description blanked out (case-insensitive, '-' or ' ' alike)."""
        out = text
        for w in self.description_words():
            pattern = r"(?<!\w)" + r"[\s-]+".join(re.escape(p) for p in re.split(r"[\s-]+", w)) + r"(?!\w)"
            out = re.sub(pattern, " ", out, flags=re.I)
        return out

    # ------------------------------------------------------------------ naming records

    def named_items(self, text: str) -> set[str]:
        """Items the text names: by item id, or by a product name followed (before the next product
        name) by every one of the variant's options as `option: value`."""
        by_id = {iid for iid in self.items if re.search(r"(?<!\w)" + re.escape(iid) + r"(?!\w)", text)}
        names = sorted({it["name"] for it in self.items.values() if it["name"]}, key=len, reverse=True)
        if not names:
            return by_id
        spots = sorted((m.start(), m.end()) for n in names
                       for m in re.finditer(r"(?<!\w)" + re.escape(n) + r"(?!\w)", text, flags=re.I))
        segments: list[tuple[str, str]] = []
        for i, (s, e) in enumerate(spots):
            if i and s < spots[i - 1][1]:
                continue  # a shorter name inside a longer one already taken
            end = next((s2 for s2, _ in spots[i + 1:] if s2 >= e), len(text))
            segments.append((text[s:e].lower(), text[e:end].lower()))
        found = by_id
        for iid, it in self.items.items():
            opts = it["options"]
            if not opts:
                continue
            for name, tail in segments:
                if name == it["name"].lower() and all(
                        re.search(re.escape(str(k).lower()) + r"\W{1,3}" + re.escape(str(v).lower()) + r"(?!\w)", tail)
                        for k, v in opts.items()):
                    found.add(iid)
                    break
        return found

    def names_payment(self, text: str, pm_id: str) -> bool:
        if pm_id.lower() in text.lower():
            return True
        pm = self.payments.get(pm_id)
        if pm is None:
            return False
        terms = payment_terms(pm)
        if pm.get("source") == "gift_card" and sum(p.get("source") == "gift_card" for p in self.payments.values()) > 1:
            return False  # "gift card" alone does not say which one
        return all(mentions(text, t) for t in terms)

    def named_payments(self, text: str) -> set[str]:
        return {pid for pid in self.payments if self.names_payment(text, pid)}

    def named_orders(self, text: str) -> set[str]:
        return {o for o in self.orders if mentions(text, order_ref(o))}


def states_action(text: str, action: Action, records: Records) -> bool:
    """Whether `text` names every argument of `action` and no other order, item or payment method.

    The arguments determine the action: an order's status allows only one of the writes that take
    the same arguments (modify items of a pending order, exchange those of a delivered one)."""
    a = action.arguments
    if "order_id" in a:
        if not mentions(text, order_ref(str(a["order_id"]))):
            return False
        if records.named_orders(text) - {str(a["order_id"])}:
            return False
    wanted_items = {str(i) for k in ("item_ids", "new_item_ids") for i in a.get(k) or []}
    if wanted_items:
        if records.named_items(text) != wanted_items:
            return False
    if a.get("payment_method_id"):
        pm = str(a["payment_method_id"])
        if not records.names_payment(text, pm) or records.named_payments(text) - {pm}:
            return False
    if "reason" in a and str(a["reason"]).lower() not in text.lower():
        return False
    for key in ("address1", "zip"):
        if key in a and str(a[key]).lower() not in text.lower():
            return False
    return bool(a)
