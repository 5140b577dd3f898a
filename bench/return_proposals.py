"""Which items an agent's return proposals name: in a paper-table folder's greedy evaluation
episodes, per model and customer, over the tasks whose customer wants items returned, how many
episodes propose a return, how many return proposals there are, and how many name every product the
customer wants returned, how many name some other product of the order instead, and how many name
the refund's payment method in the words the customer checks (rl/tasks/phrasing.py `payment_terms`:
a card's last four digits, "paypal", "gift card").

Why: the customer says yes only to a return that names its items (f13da6e), and the cold start of
`dev-item-names` named "the Dumbbell Set" in 39 of 43 return proposals whatever the customer wanted
(bench/results/README.md, session 36). Pass^1 says whether a return went through; this says
whether the words were right, which `item_refs` is meant to fix. A proposal counts as a return as
the customer reads it (rl/tasks/phrasing.py `proposal_matches`); products are read through the
records the conversation showed, by name or (under `item_refs`) in the expanded mention.

Usage: .venv/bin/python bench/return_proposals.py --out DIR [--json]
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from unconfirmed_writes import counts_from_cli, gold_arguments

RETURN = "return_delivered_order_items"


def _returns(folder: Path) -> dict[str, tuple[set[str], str]]:
    """task id -> the item ids its customer wants returned and the refund's payment method id (tasks
    with a return among their goals)."""
    out: dict[str, tuple[set[str], str]] = {}
    for task_id, args in gold_arguments(folder, RETURN):
        out.setdefault(task_id, ({str(i) for i in args.get("item_ids", [])}, str(args.get("payment_method_id"))))
    return out


def count(path: Path) -> dict[str, int]:
    from rl.simulator import reading as R
    from rl.simulator.proposal import Records
    from rl.tasks.phrasing import mentions, payment_terms, proposal_matches

    returns = _returns(path.parents[4])
    c: dict[str, int] = defaultdict(int)
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e["task_id"] not in returns or e.get("excluded"):
            continue
        wanted, pm_id = returns[e["task_id"]]
        records = Records.from_conversation(e["messages"])
        names = {iid: it["name"] for iid, it in records.items.items() if it["name"]}
        right = {names[i] for i in wanted if i in names}
        others = {n for n in names.values() if n not in right}
        pm = records.payments.get(pm_id)
        pay_terms = payment_terms(pm) if pm else []
        proposals = [m["content"] for m in e["messages"] if m.get("role") == "assistant" and m.get("content")
                     and R.asks_confirmation(m["content"]) and proposal_matches(m["content"], "return", [])]
        c["episodes"] += 1
        c["passed"] += e.get("reward") == 1.0
        c["proposed_return"] += bool(proposals)
        for p in proposals:
            c["return_proposals"] += 1
            c["right_products"] += bool(right) and all(mentions(p, n) for n in right)
            c["other_products"] += any(mentions(p, n) for n in others)
            c["right_payment"] += bool(pay_terms) and all(mentions(p, t) for t in pay_terms)
    return dict(c)


def main() -> None:
    res = counts_from_cli(__doc__, count)
    if res is None:
        return
    print("| model | customer | return tasks (passed) | proposed a return | return proposals | "
          "name the customer's products | name another product of theirs | name the refund's payment method |\n"
          "|---|---|---|---|---|---|---|---|")
    for model, by_customer in res.items():
        for customer, c in by_customer.items():
            print(f"| {model} | {customer} | {c.get('episodes', 0)} ({c.get('passed', 0)}) | "
                  f"{c.get('proposed_return', 0)} | {c.get('return_proposals', 0)} | "
                  f"{c.get('right_products', 0)} | {c.get('other_products', 0)} | {c.get('right_payment', 0)} |")


if __name__ == "__main__":
    main()
