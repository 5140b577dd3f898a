"""Why failed episodes failed: each one is compared with its task's gold writes and expected answers.

A failed episode (reward 0, not excluded) gets every cause that applies, each counted once:
- `wrong_argument:TOOL.PARAM`: a successful write of the gold tool on the gold target (order or
  user) with PARAM different from the gold value (`wrong_argument:cancel_pending_order.reason`);
- `failed_write:TOOL`: the gold write was attempted on its target but every attempt errored;
- `missing_write:TOOL`: the gold write was never attempted on its target;
- `extra_write:TOOL`: a successful write that no gold write asks for (another order, another tool);
- `missing_output`: an answer the task expects never appears in the agent's messages;
- `unconfirmed_write:TOOL`: a write took effect without the customer's yes (rl/env/consent.py);
- `ended_by:max_turns`: the conversation ran out of turns (alongside the causes above);
- `other`: none of the above (the final state differs in a way the calls do not show).

Counts over an evaluation say which skill to work on (a cold start that always names the same
cancellation reason shows up as `wrong_argument:cancel_pending_order.reason`), where pass^1
alone only says how many tasks failed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from rl.env.episode import Trajectory
from rl.tasks.criteria import action_target, check, same_action
from rl.tasks.schema import Task
from rl.tasks.tools_meta import WRITE_TOOLS


def _args(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _same_value(key: str, gold: Any, got: Any) -> bool:
    if isinstance(gold, list) and isinstance(got, list) and key.endswith("item_ids"):
        return sorted(map(str, gold)) == sorted(map(str, got))
    return gold == got


def failure_causes(task: Task, traj: Trajectory) -> list[str]:
    """The causes of one episode's failure (see the module docstring); [] for a success or an
    excluded episode."""
    if traj.excluded is not None or traj.success:
        return []
    calls = [(c.name, _args(c.arguments), bool(c.ok)) for c in traj.tool_calls]
    ok_writes = [(n, a) for n, a, ok in calls if ok and n in WRITE_TOOLS]
    gold = [g for g in task.gold_actions if g.name in WRITE_TOOLS]
    causes: list[str] = []
    for g in gold:
        if any(same_action(g, n, a) for n, a in ok_writes):
            continue
        on_target = [a for n, a in ok_writes if n == g.name and action_target(a) == action_target(g.arguments)]
        if on_target:
            got = on_target[-1]
            causes += [f"wrong_argument:{g.name}.{k}" for k, v in g.arguments.items()
                       if not _same_value(k, v, got.get(k))]
        elif any(n == g.name and action_target(a) == action_target(g.arguments) for n, a, _ in calls):
            causes.append(f"failed_write:{g.name}")
        else:
            causes.append(f"missing_write:{g.name}")
    for n, a in ok_writes:
        if not any(g.name == n and action_target(g.arguments) == action_target(a) for g in gold):
            causes.append(f"extra_write:{n}")
    texts = [str(m.get("content") or "") for m in traj.messages if m.get("role") == "assistant"]
    if any(c.kind == "output" and not check(c, calls, texts) for c in task.criteria):
        causes.append("missing_output")
    unconfirmed = (traj.breakdown or {}).get("unconfirmed_writes") or []
    causes += [f"unconfirmed_write:{w.split(' ', 1)[0]}" for w in unconfirmed]
    if traj.ended_by == "max_turns":
        causes.append("ended_by:max_turns")
    causes = list(dict.fromkeys(causes))
    return causes if any(not c.startswith("ended_by:") for c in causes) else [*causes, "other"]


def count_failures(tasks: Iterable[Task], trajs: Iterable[Trajectory]) -> dict[str, int]:
    """How many failed episodes show each cause, most frequent first; episodes of unknown tasks
    are skipped."""
    by_id = {t.id: t for t in tasks}
    counts: Counter = Counter()
    for traj in trajs:
        task = by_id.get(traj.task_id)
        if task is not None:
            counts.update(failure_causes(task, traj))
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
