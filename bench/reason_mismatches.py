"""Cancellations that write a reason other than the one proposed: in a paper-table folder's greedy
evaluation episodes, per model and customer, each `cancel_pending_order` call whose `reason`
differs from the reason the last proposal before it named (the last assistant message that asks
for a confirmation and names exactly one reason), how many episodes hold one, and how many of
those passed.

Why: in `dev-refused` (session 47, bench/results/README.md) the models proposed the other reason
after a refusal, the customer said yes, and the call then wrote the refused reason, which fails the
task. `reason_follows_proposal` (rl/chat/proposed_reason.py) holds the call to the proposal; this
counts what is left. Calls with no reason-naming proposal before them are counted apart.

Usage: .venv/bin/python bench/reason_mismatches.py --out DIR [--json]
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from reason_switches import named_reason
from unconfirmed_writes import counts_from_cli

CANCEL = "cancel_pending_order"


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    args = call.get("function", {}).get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return {}
    return args if isinstance(args, dict) else {}


def count(path: Path) -> dict[str, int]:
    from rl.simulator import reading as R

    out: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e.get("excluded"):
            continue
        proposed: str | None = None
        mismatched = False
        for m in e["messages"]:
            if m.get("role") != "assistant":
                continue
            text = m.get("content") or ""
            if R.asks_confirmation(text):
                proposed = named_reason(text) or proposed
            for call in m.get("tool_calls") or []:
                if call.get("function", {}).get("name") != CANCEL:
                    continue
                out["cancel_calls"] += 1
                written = _arguments(call).get("reason")
                if proposed is None:
                    out["no_proposal_before"] += 1
                elif written != proposed:
                    out["mismatched"] += 1
                    mismatched = True
        out["episodes"] += 1
        out["mismatched_episodes"] += mismatched
        out["mismatched_passed"] += mismatched and e.get("reward") == 1.0
    return {k: out[k] for k in ("episodes", "cancel_calls", "no_proposal_before", "mismatched",
                                "mismatched_episodes", "mismatched_passed")}


def main() -> None:
    res = counts_from_cli(__doc__, count)
    if res is None:
        return
    print("| model | customer | episodes | cancellation calls | with no reason proposed before | reason other "
          "than proposed | episodes with one (passed) |\n|---|---|---|---|---|---|---|")
    for model, by_customer in res.items():
        for customer, c in by_customer.items():
            print(f"| {model} | {customer} | {c['episodes']} | {c['cancel_calls']} | {c['no_proposal_before']} | "
                  f"{c['mismatched']} | {c['mismatched_episodes']} ({c['mismatched_passed']}) |")


if __name__ == "__main__":
    main()
