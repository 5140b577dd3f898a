"""Where the cycle's task set takes tasks it does not generate itself.

- `mined_tasks`: production conversations that ended with a transfer to a human and that ops
  have resolved, turned into tasks (the customer's messages give the goal, the staff tool calls
  ops made give the gold actions). The escalation queue lives with the service (`rl/tasks/mined.py`);
  `restore_escalated` prepares the snapshot so those tasks start where the customer was.
- `gate_suite`: the fixed suite the gates play candidates on. It comes from the recipe (held-out
  customers that no training task uses); the gates module may name its own suite.
"""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)


def mined_tasks(store_url: str, data: dict[str, Any], cycle_id: str | None = None) -> list[Any]:
    """Tasks mined from resolved escalations, on the records of the cycle's snapshot (`data`);
    their escalations are marked mined by `cycle_id`."""
    from rl.tasks.mined import mined_tasks as from_queue

    return list(from_queue(store_url, data, cycle_id=cycle_id))


async def restore_escalated(store_url: str, live: dict[str, Any], cycle_id: str | None = None) -> dict[str, Any]:
    """The live records with each customer about to be mined as they were when their conversation
    was transferred (ops have changed them since): the state the mined tasks start from."""
    from rl.tasks.mined import restore_escalated_records

    return await restore_escalated_records(store_url, live, cycle_id)


def gate_suite(recipe: Any, data: dict[str, Any], sets: dict[str, list[Any]]) -> list[Any]:
    """The fixed gate suite: the gates module's when it defines one, else the recipe's held-out
    evaluation tasks (customers no cold-start or RL task uses)."""
    try:
        from rl.eval.gates import gate_suite_tasks
    except ImportError:
        return list(sets["eval"])
    return list(gate_suite_tasks(recipe, data))
