"""Cold-start data augmentation that leaves a small model no shortcut around reading the
conversation. Identifier augmentation: the same conversation with every run of four or more digits
(order, item, payment-method and tracking ids, the digits of user ids and emails, zip codes, street
numbers) replaced by a fresh run of the same length, and the customer's names by other names, the
same replacement everywhere (messages, tool calls, tool results), so ids cannot be memorised per
customer, only copied; copies are training text only, marked `meta.augmented`. Cancellation-reason
counterfactuals: a conversation in which the customer gave one cancellation reason, again with the
other reason (the customer's words and the agent's proposal and call swapped), so only reading the
customer predicts the reason (counterfactual data augmentation); marked `meta.counterfactual`."""


from __future__ import annotations

import json
import random
import re
from typing import Any

from backend.store.seed_catalog import FIRST_NAMES, LAST_NAMES
from rl.chat.views import rewrite_call

DIGIT_RUN = re.compile(r"\d{4,}")
USER_ID = re.compile(r"\b([a-z]+)_([a-z]+)_\d{3,}\b")


def customer_names(record: dict[str, Any]) -> tuple[str, str] | None:
    """The customer's (first, last) name as the conversation shows it, if it does."""
    for m in record["messages"]:
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            if fn.get("name") == "find_user_id_by_name_zip":
                args = _args(fn.get("arguments"))
                if args.get("first_name") and args.get("last_name"):
                    return str(args["first_name"]), str(args["last_name"])
    for m in record["messages"]:
        found = USER_ID.search(json.dumps(m))
        if found:
            return found.group(1).capitalize(), found.group(2).capitalize()
    return None


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


class _Renamer:
    def __init__(self, rng: random.Random, names: tuple[str, str] | None) -> None:
        self.rng = rng
        self.digits: dict[str, str] = {}
        self.used: set[str] = set()
        self.words: dict[str, str] = {}
        if names:
            pools = (FIRST_NAMES, LAST_NAMES)
            for old, pool in zip(names, pools, strict=True):
                new = rng.choice([n for n in pool if n.lower() != old.lower()])
                for f in (str.lower, str.capitalize, str.upper):
                    self.words[f(old)] = f(new)
        alternatives = "|".join(map(re.escape, sorted(self.words, key=len, reverse=True)))
        self.word_re = re.compile(rf"(?<![A-Za-z])({alternatives})(?![A-Za-z])") if self.words else None

    def _digit_run(self, m: re.Match[str]) -> str:
        old = m.group(0)
        if old not in self.digits:
            while True:
                new = str(self.rng.randrange(1, 10)) + "".join(str(self.rng.randrange(10)) for _ in old[1:])
                if new not in self.used and new != old:
                    break
            self.used.add(new)
            self.digits[old] = new
        return self.digits[old]

    def text(self, s: str) -> str:
        s = DIGIT_RUN.sub(self._digit_run, s)
        return self.word_re.sub(lambda m: self.words[m.group(0)], s) if self.word_re else s


def augment_record(record: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """One consistently renamed copy of a cold-start record (messages and tool calls; tools unchanged)."""
    r = _Renamer(rng, customer_names(record))
    messages = []
    for m in record["messages"]:
        m = dict(m)
        if m.get("content") is not None:
            m["content"] = r.text(str(m["content"]))
        if m.get("tool_calls"):
            m["tool_calls"] = [rewrite_call(c, r.text) for c in m["tool_calls"]]
        messages.append(m)
    return {**record, "messages": messages, "meta": {**record.get("meta", {}), "augmented": True}}


def augmented_copies(records: list[dict[str, Any]], copies: int, seed: int = 0) -> list[dict[str, Any]]:
    """`copies` renamed copies of every record (deterministic for a seed), originals not included."""
    rng = random.Random(seed)
    return [augment_record(rec, rng) for _ in range(copies) for rec in records]


# --------------------------------------------------------------------------- counterfactual reasons
def reason_counterfactual(record: dict[str, Any], reasons: dict[str, str]) -> dict[str, Any] | None:
    """`record` with the cancellation reason swapped (customer words `reasons[r]`, agent text and
    calls `r`), or None when the conversation has no cancellation with one of two known reasons."""
    if len(reasons) != 2:
        raise ValueError("a reason counterfactual swaps between exactly two reasons")
    a, b = sorted(reasons)
    swap = {a: b, b: a, reasons[a]: reasons[b], reasons[b]: reasons[a]}
    if not any(_call_reason(c) in swap for m in record["messages"] for c in m.get("tool_calls") or []):
        return None
    pattern = re.compile("|".join(map(re.escape, sorted(swap, key=len, reverse=True))))

    def swapped(s: str) -> str:
        return pattern.sub(lambda m: swap[m.group(0)], s)

    messages = []
    for m in record["messages"]:
        m = dict(m)
        if m.get("content") is not None and m.get("role") != "system":
            m["content"] = swapped(str(m["content"]))
        if m.get("tool_calls"):
            m["tool_calls"] = [rewrite_call(c, swapped) for c in m["tool_calls"]]
        messages.append(m)
    return {**record, "messages": messages, "meta": {**record.get("meta", {}), "counterfactual": "reason"}}


def reason_counterfactuals(records: list[dict[str, Any]], reasons: dict[str, str]) -> list[dict[str, Any]]:
    """The reason-swapped copy of every record that has one (originals not included)."""
    return [c for c in (reason_counterfactual(r, reasons) for r in records) if c is not None]


def _call_reason(call: dict[str, Any]) -> str | None:
    fn = call.get("function", {})
    return str(_args(fn.get("arguments")).get("reason")) if fn.get("name") == "cancel_pending_order" else None


def sft_training_records(records: list[dict[str, Any]], *, counterfactuals: bool, augment_copies: int = 0,
                         seed: int = 0) -> list[dict[str, Any]]:
    """The records a recipe's SFT trains on: the cold-start records, their reason counterfactuals
    (`counterfactuals`) when asked, then `augment_copies` identifier-augmented copies of all of them."""
    if counterfactuals:
        from rl.tasks.goals import REASONS

        records = records + reason_counterfactuals(records, REASONS)
    if augment_copies:
        records = records + augmented_copies(records, augment_copies, seed=seed)
    return records
