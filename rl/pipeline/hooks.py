"""Where the cycle's task set takes tasks it does not generate itself.

- `mined_tasks`: production conversations that ended with a transfer to a human and that ops
  have resolved, turned into tasks (the customer's messages give the goal, the staff tool calls
  ops made give the gold actions). The escalation queue lives with the service (`rl/tasks/mined.py`);
  `restored_store` gives the snapshot the records those tasks start from.
- `gate_suite`: the fixed suite the gates play candidates on (held-out and safety tasks from
  rl/eval/gate_suite.py, sized by the recipe, on customers that no training task uses).
"""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)


def mined_tasks(store_url: str, data: dict[str, Any], snapshot: str, cycle_id: str | None = None) -> list[Any]:
    """Tasks mined from resolved escalations, on the records of the cycle's snapshot (`data`), named
    as played on `snapshot` (the recipe's store reference, which the cycle maps to its snapshot);
    their escalations are marked mined by `cycle_id`."""
    from rl.tasks.mined import mined_tasks as from_queue

    return list(from_queue(store_url, data, snapshot=snapshot, cycle_id=cycle_id))


async def restored_store(store_url: str, cycle_id: str | None = None) -> dict[str, Any] | None:
    """The live store's records with each customer about to be mined as they were when their
    conversation was transferred (ops have changed them since), or None when nothing is to be
    mined (the snapshot is then a straight copy of the live store)."""
    from rl.tasks.mined import restored_store as from_queue

    return await from_queue(store_url, cycle_id)


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
