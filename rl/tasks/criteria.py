"""Checking a task's criteria against what happened in an episode, for the task completion rate.

TCR = satisfied criteria / all criteria: partial credit where the 0/1 reward gives none. An
`action` criterion is met by a successful call of the same tool with the same arguments (item
lists compared as sets of ids, as the store sorts them); `no_action` by the absence of any
successful call of that tool on the same order (or user); `output` by the answer appearing in an
agent message (tau's rule); `authenticated` by a successful identity lookup.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rl.tasks.schema import Action, Criterion, Task


def _norm(args: dict[str, Any]) -> dict[str, Any]:
    return {k: (sorted(v) if isinstance(v, list) and k in ("item_ids",) else v) for k, v in args.items()}


def _pairs(args: dict[str, Any]) -> list[tuple[str, str]]:
    """(old, new) item pairs of an item change, order-insensitive."""
    return sorted(zip(args.get("item_ids", []), args.get("new_item_ids", []), strict=False))


def same_action(a: Action, name: str, args: dict[str, Any]) -> bool:
    if a.name != name:
        return False
    if "new_item_ids" in a.arguments:
        rest = {k: v for k, v in a.arguments.items() if k not in ("item_ids", "new_item_ids")}
        got = {k: v for k, v in args.items() if k not in ("item_ids", "new_item_ids")}
        return rest == got and _pairs(a.arguments) == _pairs(args)
    return _norm(a.arguments) == _norm(args)


def action_target(args: dict[str, Any]) -> Any:
    """What a write acts on: its order, else its user."""
    return args.get("order_id", args.get("user_id"))


def check(c: Criterion, calls: list[tuple[str, dict[str, Any], bool]], agent_texts: Iterable[str]) -> bool:
    ok_calls = [(n, a) for n, a, ok in calls if ok]
    if c.kind == "authenticated":
        return any(n.startswith("find_user_id") for n, _ in ok_calls)
    if c.kind == "action" and c.action is not None:
        return any(same_action(c.action, n, a) for n, a in ok_calls)
    if c.kind == "no_action" and c.action is not None and c.match == "exact":
        return not any(same_action(c.action, n, a) for n, a in ok_calls)
    if c.kind == "no_action" and c.action is not None:
        target = action_target(c.action.arguments)
        return not any(n == c.action.name and action_target(a) == target for n, a in ok_calls)
    if c.kind == "output" and c.output is not None:
        return any(c.output.lower() in t.lower().replace(",", "") for t in agent_texts)
    return False


def evaluate_criteria(task: Task, calls: list[tuple[str, dict[str, Any], bool]],
                      agent_texts: list[str]) -> tuple[dict[str, bool], float]:
    """Each criterion's result and the TCR (1.0 for a task without criteria)."""
    results = {c.id: check(c, calls, agent_texts) for c in task.criteria}
    tcr = sum(results.values()) / len(results) if results else 1.0
    return results, tcr
