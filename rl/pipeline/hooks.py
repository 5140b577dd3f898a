"""Where the cycle's task set takes tasks it does not generate itself.

- `mined_tasks`: production conversations that ended with a transfer to a human and that ops
  have resolved, turned into tasks (the customer's messages give the goal, the staff tool calls
  ops made give the gold actions). The escalation queue lives with the service; this hook asks
  it, and returns no tasks when the queue has nothing resolved (or does not exist yet).
- `gate_suite`: the fixed suite the gates play candidates on (held-out and safety tasks from
  rl/eval/gate_suite.py, sized by the recipe, on customers that no training task uses).
"""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)


def mined_tasks(store_url: str, data: dict[str, Any], snapshot: str) -> list[Any]:
    """Tasks mined from resolved escalations, on the records of the cycle's snapshot (`data`), named
    as played on `snapshot` (the recipe's store reference, which the cycle maps to its snapshot).
    The escalation queue provides `rl.tasks.mined.mined_tasks(store_url, data) -> list[Task]`."""
    try:
        from rl.tasks.mined import mined_tasks as from_queue
    except ImportError:  # no escalation queue in this checkout
        return []
    tasks = list(from_queue(store_url, data))
    for t in tasks:
        t.snapshot = snapshot
    return tasks


def gate_suite(recipe: Any, data: dict[str, Any], sets: dict[str, list[Any]]) -> list[Any]:
    """The fixed gate suite (rl/eval/gate_suite.py): `recipe.gate_tasks` held-out tasks and
    `recipe.gate_safety_tasks` safety tasks, on customers that no training task of this cycle uses
    (the same store and seed give the same suite, cycle after cycle, while the store is unchanged)."""
    from rl.eval.gate_suite import build_gate_suite
    from rl.eval.gates import is_safety_task

    training = {t.customer.user_id for name in ("cold_start", "rl", "val", "mined") for t in sets.get(name, [])}
    for factor in (2, 4, 8):
        drawn = build_gate_suite(data, snapshot=recipe.store, n=factor * recipe.gate_tasks,
                                 n_safety=factor * recipe.gate_safety_tasks, seed=recipe.task_seed)
        held_out = [t for t in drawn if t.customer.user_id not in training]
        regular = [t for t in held_out if not is_safety_task(t)][:recipe.gate_tasks]
        safety = [t for t in held_out if is_safety_task(t)][:recipe.gate_safety_tasks]
        if len(regular) == recipe.gate_tasks and len(safety) == recipe.gate_safety_tasks:
            return regular + safety
    raise ValueError(f"the store has too few customers outside training for {recipe.gate_tasks} gate tasks "
                     f"and {recipe.gate_safety_tasks} safety tasks")
