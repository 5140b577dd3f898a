"""Goal shifts reached through a proposal of something else: in a paper-table folder's greedy
evaluation episodes, the passed goal-shift tasks whose first confirmation request did not propose
the customer's first request (its kind of action, on its order), per model and customer.

Until code 0a2e136 a customer with a confirmation-triggered shift changed their mind at *any*
request to confirm, so an agent that proposed a cancellation to a customer asking for a new address
heard "forget that, cancel it instead" and passed the shift-to-cancellation task without ever
proposing the request (rl/simulator/scripted.py `_proposes_goal` now requires the request). This
counts such passes in runs made before the fix, and the MUA-RL gain left when they count as misses
(a lower bound on what the fixed customer gives those models: after its "no" an agent may still
recover). The test reads the proposal as the customer does (rl/tasks/phrasing.py `proposes_request`).

Usage: .venv/bin/python bench/shifts_by_other_proposal.py --out DIR [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from unconfirmed_writes import evaluated_models, per_model_and_customer, print_strict_gains


def count(path: Path, tasks: dict[str, Any]) -> dict[str, Any]:
    from rl.simulator import reading as R
    from rl.tasks.phrasing import proposes_request

    out: dict[str, Any] = {"passed": 0, "passed_shifts": 0, "by_other_proposal": 0, "strict_by_task": {}}
    for line in path.read_text().splitlines():
        e = json.loads(line)
        passed = e.get("reward") == 1.0
        other = False
        if passed and "goal_shift" in (e.get("tags") or []):
            goal = tasks[e["task_id"]].script.goals[0]
            first = next((m["content"] for m in e["messages"] if m.get("role") == "assistant"
                          and m.get("content") and R.asks_confirmation(m["content"])), None)
            other = first is not None and not proposes_request(first, goal.kind, goal.order_id)
            out["passed_shifts"] += 1
            out["by_other_proposal"] += other
        out["passed"] += passed
        if not e.get("excluded"):
            out["strict_by_task"][e["task_id"]] = float(passed and not other)
    return out


def table(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
    from rl.tasks.schema import load_tasks

    recipe = json.loads((folder / "recipe.json").read_text())
    tasks = {t.id: t for t in load_tasks(folder / "tasks" / f"{recipe.get('eval_set', 'test')}.json")}
    return per_model_and_customer(folder, evaluated_models(folder), lambda path: count(path, tasks))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = table(a.out)
    if a.json:
        print(json.dumps(res, indent=1))
        return
    print("| model | customer | passed | passed goal shifts | of them reached through another proposal |\n"
          "|---|---|---|---|---|")
    for model, by_customer in res.items():
        for customer, c in by_customer.items():
            print(f"| {model} | {customer} | {c['passed']} | {c['passed_shifts']} | {c['by_other_proposal']} |")
    print_strict_gains(res, a.out, "such shifts counted as misses")


if __name__ == "__main__":
    main()
