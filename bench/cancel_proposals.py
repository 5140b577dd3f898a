"""Cancellations proposed to customers who asked for something else: in a paper-table folder's
greedy evaluation episodes, per model, customer and task category, how many episodes ask to
confirm anything, and how many of those ask to confirm a cancellation although the task has no
cancellation among the customer's requests (status questions, plain address changes).

Why: GRPO's RL mix ends in a cancellation in seven of its ten slots, and in `c4` the MUA-RL models
proposed a cancellation in most held-out status questions, where the cold start proposed none
(bench/results/README.md). The reward cannot see such a proposal (nothing is written without the
customer's yes), so this reads it from the transcripts. A proposal counts as a cancellation as the
customer reads it (rl/tasks/phrasing.py `proposal_matches`).

Usage: .venv/bin/python bench/cancel_proposals.py --out DIR [--json]
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from unconfirmed_writes import counts_from_cli

NO_CANCEL = ("info_status", "modify_address")  # categories whose customer never asks to cancel


def count(path: Path) -> dict[str, dict[str, int]]:
    from rl.simulator import reading as R
    from rl.tasks.phrasing import proposal_matches

    out: dict[str, dict[str, int]] = defaultdict(lambda: {"episodes": 0, "asked_confirmation": 0,
                                                          "proposed_cancel": 0, "passed": 0})
    for line in path.read_text().splitlines():
        e = json.loads(line)
        category = next((t.split(":", 1)[1] for t in e.get("tags") or [] if t.startswith("category:")), "?")
        if category not in NO_CANCEL or e.get("excluded"):
            continue
        asks = [m["content"] for m in e["messages"] if m.get("role") == "assistant" and m.get("content")
                and R.asks_confirmation(m["content"])]
        c = out[category]
        c["episodes"] += 1
        c["passed"] += e.get("reward") == 1.0
        c["asked_confirmation"] += bool(asks)
        c["proposed_cancel"] += any(proposal_matches(a, "cancel", []) for a in asks)
    return dict(out)


def main() -> None:
    res = counts_from_cli(__doc__, count)
    if res is None:
        return
    print("| model | customer | category | episodes (passed) | asked to confirm anything | proposed a cancellation |\n"
          "|---|---|---|---|---|---|")
    for model, by_customer in res.items():
        for customer, by_category in by_customer.items():
            for category, c in sorted(by_category.items()):
                print(f"| {model} | {customer} | {category} | {c['episodes']} ({c['passed']}) | "
                      f"{c['asked_confirmation']} | {c['proposed_cancel']} |")


if __name__ == "__main__":
    main()
