"""Whether an agent's cancellation proposals carry the customer's own reason: in a paper-table
folder's greedy evaluation episodes, per model and customer, over the tasks whose customer wants an
order cancelled, how many proposals name a reason for that order, and how many name the reason the
customer holds (the gold action's), as proposals and as the first proposal of each episode.

Why: the reason is graded, and two cold starts of the same recipe up to the return proposals read
it very differently (`dev-items2`: 47 of 52 training-style proposals right; `dev-item-refs`: 29 of
69; bench/results/README.md, session 37). The customer says no to the other reason, so a cold start
that misreads it fails the cancellations GRPO trains on. A proposal is an agent message with the
teacher's reason frame ("with the reason '...'", rl/policies/wording.py `REASON_LEAD`); its order is
the first order id it names.

Usage: .venv/bin/python bench/reason_reading.py --out DIR [--json]
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from unconfirmed_writes import counts_from_cli, gold_arguments

CANCEL = "cancel_pending_order"
ORDER = re.compile(r"#W\d+")


def _reasons(folder: Path) -> dict[str, dict[str, str]]:
    """task id -> order id -> the reason its customer holds (every cancellation goal, refused ones
    included: a customer haggling for a cancellation holds a reason too)."""
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for task_id, args in gold_arguments(folder, CANCEL):
        out[task_id].setdefault(str(args.get("order_id")), str(args.get("reason")))
    return dict(out)


def count(path: Path) -> dict[str, int]:
    from rl.policies.wording import REASON_LEAD

    reasons = _reasons(path.parents[4])
    c: dict[str, int] = defaultdict(int)
    for line in path.read_text().splitlines():
        e = json.loads(line)
        held = reasons.get(e["task_id"])
        if not held or e.get("excluded"):
            continue
        c["episodes"] += 1
        first = True
        for m in e["messages"]:
            text = m.get("content") if m.get("role") == "assistant" else None
            if not text or REASON_LEAD not in text:
                continue
            said = text.split(REASON_LEAD, 1)[1].split("'", 1)[0].strip()
            orders = ORDER.findall(text)
            if not orders or orders[0] not in held:
                continue
            right = said == held[orders[0]]
            c["proposals"] += 1
            c["right"] += right
            if first:
                c["episodes_proposing"] += 1
                c["first_right"] += right
                first = False
    return dict(c)


def main() -> None:
    res = counts_from_cli(__doc__, count)
    if res is None:
        return
    print("| model | customer | cancellation tasks | episodes proposing | first proposal right | "
          "proposals naming a reason | with the customer's reason |\n|---|---|---|---|---|---|---|")
    for model, by_customer in res.items():
        for customer, c in by_customer.items():
            print(f"| {model} | {customer} | {c.get('episodes', 0)} | {c.get('episodes_proposing', 0)} | "
                  f"{c.get('first_right', 0)} | {c.get('proposals', 0)} | {c.get('right', 0)} |")


if __name__ == "__main__":
    main()
