"""Proposals before any lookup: in a paper-table folder's greedy evaluation episodes, per model and
customer, the episodes whose agent first asked the customer to confirm a change ("To confirm, I will
...") before any lookup had shown an order's record, before any had shown an order's or the
customer's record, and before it had even identified the customer, how many of each passed, and
the episodes where a tool was called 20 times or more (a loop).

Why: the teacher never proposes before its lookups (rl/policies/oracle.py `_start_goal`), and with
the training-style customer the models seldom do; with the held-out customer, whose "The account
email is ..." they never read in training, GRPO models proposed at once and, after the customer's
"no", again and again (bench/results/README.md, `dev-lookups`). `propose_after_lookup` holds such
proposals back; this counts them in any folder, with or without it. A record is what
rl/policies/local.py `shows_record` calls one.

Usage: .venv/bin/python bench/early_proposals.py --out DIR [--json]
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from unconfirmed_writes import counts_from_cli

LOOP = 20  # calls of one tool in one episode that count as a loop


def _early(messages: list[dict[str, Any]]) -> tuple[bool, bool, bool]:
    """Whether the agent's first proposal came before any order's record was shown, before any
    record (an order's or the customer's) was, and before the customer was identified."""
    from rl.chat.proposal_template import TRIGGER
    from rl.policies.local import order_statuses, shows_record

    called: dict[str, str] = {}  # tool call id -> the tool's name
    identified = recorded = order = False
    for m in messages:
        for tc in m.get("tool_calls") or []:
            called[tc.get("id", "")] = tc["function"]["name"]
        if m.get("role") == "tool":
            text = str(m.get("content") or "")
            recorded = recorded or shows_record(text)
            order = order or bool(order_statuses(text))
            # a record shown identifies the customer too, so the three columns nest
            identified = identified or recorded or (
                called.get(m.get("tool_call_id", ""), "").startswith("find_user_id") and not text.startswith("Error"))
        elif m.get("role") == "assistant" and TRIGGER in str(m.get("content") or ""):
            return not order, not recorded, not identified
    return False, False, False


def count(path: Path) -> dict[str, int]:
    c: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e.get("excluded"):
            continue
        passed = e.get("reward") == 1.0
        before_order, before_lookup, before_identity = _early(e["messages"])
        calls = Counter(tc["function"]["name"] for m in e["messages"] for tc in m.get("tool_calls") or [])
        looped = max(calls.values(), default=0) >= LOOP
        c["episodes"] += 1
        c["passed"] += passed
        hits = (("before_order", before_order), ("before_lookup", before_lookup),
                ("before_identity", before_identity), ("loops", looped))
        for key, hit in hits:
            c[key] += hit
            c[f"{key}_passed"] += hit and passed
    return dict(c)


def main() -> None:
    res = counts_from_cli(__doc__, count)
    if res is None:
        return
    print("| model | customer | episodes (passed) | proposed before any order was looked up (passed) | "
          "before any record was (passed) | before identifying the customer (passed) | "
          "episodes with a loop (passed) |\n|---|---|---|---|---|---|---|")
    for model, by_customer in res.items():
        for customer, c in by_customer.items():
            print(f"| {model} | {customer} | {c['episodes']} ({c['passed']}) | {c['before_order']} "
                  f"({c['before_order_passed']}) | {c['before_lookup']} "
                  f"({c['before_lookup_passed']}) | {c['before_identity']} ({c['before_identity_passed']}) | "
                  f"{c['loops']} ({c['loops_passed']}) |")


if __name__ == "__main__":
    main()
