"""The training dynamics of a GRPO step, from its rollouts (the paper's per-step curves): reward
mean, the fractions of all-correct, all-wrong and informative groups, turns and generated tokens per
rollout, tool calls per rollout by tool and by kind (read / write / generic / terminal, as the tool
registry declares them), generic-tool use, the reward per task category and the tasks of each
category the step drew. Excluded rollouts (infrastructure or simulator failures) count in none of
these, as they count in no group's statistics.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

from rl.grpo.trace import Trace

# kinds whose tools touch no customer records: `think`, `calculate` (generic) and the hand-over to a
# human (terminal); what the paper's "generic tool use" curve counts
GENERIC_KINDS = ("generic", "terminal")


@functools.cache
def tool_kinds() -> dict[str, str]:
    """Tool name -> its kind in the store's registry (backend/tools/registry.py `ToolKind`)."""
    from backend.tools.retail import RETAIL

    return {t.name: str(t.kind) for t in RETAIL}


def rollout_metrics(traces: list[Trace]) -> dict[str, Any]:
    valid = [t for t in traces if not t.excluded]
    groups: dict[str, list[float]] = {}
    for t in valid:
        groups.setdefault(t.group, []).append(t.reward)
    n = max(len(valid), 1)
    n_groups = max(len(groups), 1)
    calls: Counter = Counter()
    for t in valid:
        calls.update(t.info.get("tool_calls", {}))
    kinds = tool_kinds()
    by_kind: Counter = Counter()
    for name, c in calls.items():
        by_kind[kinds.get(name, "other")] += c
    step_tasks: dict[str, set[str]] = {}
    for t in traces:
        if t.info.get("category"):
            step_tasks.setdefault(str(t.info["category"]), set()).add(t.group)
    return {
        "reward_mean": sum(t.reward for t in valid) / n,
        "rollouts": len(traces),
        "excluded": len(traces) - len(valid),
        "excluded_causes": dict(Counter(str(t.info.get("excluded")) for t in traces if t.excluded)),
        "groups": len(groups),
        "frac_all_correct": sum(all(r == 1 for r in g) for g in groups.values()) / n_groups,
        "frac_all_wrong": sum(all(r == 0 for r in g) for g in groups.values()) / n_groups,
        "informative_groups": sum(len(set(g)) > 1 for g in groups.values()),
        "turns_mean": sum(t.info.get("turns", 0) for t in valid) / n,
        "response_length": sum(t.n_generated for t in valid) / n,
        "trace_length": sum(len(t) for t in valid) / n,
        "tool_calls_per_rollout": {k: v / n for k, v in sorted(calls.items())},
        "calls_by_kind_per_rollout": {k: v / n for k, v in sorted(by_kind.items())},
        "generic_calls_per_rollout": sum(by_kind[k] for k in GENERIC_KINDS) / n,
        "reward_by_category": _reward_by_category(valid),
        "tasks_by_category": {c: len(g) for c, g in sorted(step_tasks.items())},
    }


def _reward_by_category(valid: list[Trace]) -> dict[str, dict[str, float]]:
    by: dict[str, list[float]] = {}
    for t in valid:
        if t.info.get("category"):
            by.setdefault(str(t.info["category"]), []).append(t.reward)
    return {c: {"rollouts": len(r), "reward": sum(r) / len(r)} for c, r in sorted(by.items())}
