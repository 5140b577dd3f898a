"""Where the cycle's task set takes tasks it does not generate itself.

- `mined_tasks`: production conversations that ended with a transfer to a human and that ops
  have resolved, turned into tasks (the customer's messages give the goal, the staff tool calls
  ops made give the gold actions). The escalation queue lives with the service; this hook asks
  it, and returns no tasks when the queue has nothing resolved (or does not exist yet).
- `gate_suite`: the fixed suite the gates play candidates on. It comes from the recipe (held-out
  customers that no training task uses); the gates module may name its own suite.
"""

from __future__ import annotations

from typing import Any

import structlog

log = structlog.get_logger(__name__)


def mined_tasks(store_url: str, data: dict[str, Any]) -> list[Any]:
    """Tasks mined from resolved escalations, on the records of the cycle's snapshot (`data`)."""
    try:
        from rl.tasks.mined import mined_tasks as from_queue  # provided by the escalation queue
    except ImportError:
        return []
    return list(from_queue(store_url, data))


def gate_suite(recipe: Any, data: dict[str, Any], sets: dict[str, list[Any]]) -> list[Any]:
    """The fixed gate suite: the gates module's when it defines one, else the recipe's held-out
    evaluation tasks (customers no cold-start or RL task uses)."""
    try:
        from rl.eval.gates import gate_suite_tasks
    except ImportError:
        return list(sets["eval"])
    return list(gate_suite_tasks(recipe, data))
