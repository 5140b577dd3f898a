"""How an agent gets a customer's cancellation reason: in a paper-table folder's greedy evaluation
episodes, per model and customer, how many episodes ask the customer for the reason, how many
refusals of a proposed reason there were, and whether the agent's next proposal naming a reason
switched to the other reason, named the refused one again, or never came; and how many episodes
hold a refusal and how many of those passed.

Why: in session 34's dev transcripts MUA-RL answered "That's not why, actually. I bought it by
accident." by proposing the refused reason again until the customer gave up; with two valid
reasons a refusal of one is enough to know the other (bench/results/README.md, `dev-quiet`). The
refusal is read from the customer's words: every customer of the project opens its reason refusal
with one of `REFUSALS` (rl/simulator: bank.py, varied.py, wide.py, heldout.py).

Usage: .venv/bin/python bench/reason_switches.py --out DIR [--json]
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from unconfirmed_writes import counts_from_cli

REASONS = ("no longer needed", "ordered by mistake")
REFUSALS = re.compile(r"not the reason|not my reason|not why|my reason is different", re.I)
ASKS_REASON = re.compile(r"\breason\b[^.?!]*\?", re.I)  # a question about the reason (not a proposal)


def named_reason(text: str) -> str | None:
    """The one reason a proposal names, or None (none, or both)."""
    named = [r for r in REASONS if r in text.lower()]
    return named[0] if len(named) == 1 else None


def count(path: Path) -> dict[str, int]:
    from rl.simulator import reading as R

    out: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e.get("excluded"):
            continue
        msgs = e["messages"]
        out["asked_reason"] += any(m.get("role") == "assistant" and ASKS_REASON.search(m.get("content") or "")
                                   and not R.asks_confirmation(m.get("content") or "") for m in msgs)
        refused_here = False
        for i, m in enumerate(msgs):
            text = m.get("content") or ""
            if m.get("role") != "assistant" or not R.asks_confirmation(text) or named_reason(text) is None:
                continue
            reply = next((x for x in msgs[i + 1:] if x.get("role") == "user"), None)
            if reply is None or not REFUSALS.search(reply.get("content") or ""):
                continue
            out["refusals"] += 1
            refused_here = True
            refused = named_reason(text)
            later = (x.get("content") or "" for x in msgs[msgs.index(reply) + 1:] if x.get("role") == "assistant")
            nxt = next((named_reason(t) for t in later if R.asks_confirmation(t) and named_reason(t)), None)
            out["no_further_proposal" if nxt is None else "repeated" if nxt == refused else "switched"] += 1
        out["refused_episodes"] += refused_here
        out["refused_passed"] += refused_here and e.get("reward") == 1.0
    return {k: out[k] for k in ("asked_reason", "refusals", "switched", "repeated", "no_further_proposal",
                                "refused_episodes", "refused_passed")}


def main() -> None:
    res = counts_from_cli(__doc__, count)
    if res is None:
        return
    print("| model | customer | episodes asking the reason | reason refusals | next proposal: other reason "
          "| same reason again | none | episodes with a refusal (passed) |\n|---|---|---|---|---|---|---|---|")
    for model, by_customer in res.items():
        for customer, c in by_customer.items():
            print(f"| {model} | {customer} | {c['asked_reason']} | {c['refusals']} | {c['switched']} | "
                  f"{c['repeated']} | {c['no_further_proposal']} | {c['refused_episodes']} ({c['refused_passed']}) |")


if __name__ == "__main__":
    main()
