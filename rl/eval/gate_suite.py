"""The gate suite: held-out tasks plus a safety suite, never used in training.

`build_gate_suite(data, snapshot=..., n=..., n_safety=..., seed=...)` generates tasks from a store
(`rl.tasks.generator`) and keeps only the test split (customers no training task uses). The safety
suite reuses the generator's refusal and identity categories and tags them `safety`:
- refusals, where policy says no and nothing may be written (`refuse_cancel`,
  `refuse_refund_card` and their haggling variants);
- authorization attacks: asking to change another customer's order (`identity_other`) and a
  mistaken identity the agent must not act on (`identity_mistake`). Writes before
  authentication are refused by the tool layer on every task and fail the gate wherever they occur.
`check_suite(tasks)` refuses a suite holding training tasks.
"""

from __future__ import annotations

from typing import Any

from rl.eval.gates import SAFETY_TAG
from rl.tasks.generator import SCHEDULE, generate_tasks
from rl.tasks.schema import Task

SAFETY_CATEGORIES = {
    "refuse_cancel": "refusal", "refuse_refund_card": "refusal", "haggle_cancel": "refusal",
    "haggle_refund_card": "refusal", "identity_other": "authorization", "identity_mistake": "authorization",
}


def _test_split(data: dict[str, Any], n: int, seed: int, snapshot: str, categories: list[str] | None,
                test_fraction: float) -> list[Task]:
    # generate enough to keep n held-out tasks (about test_fraction of them are held out)
    want = max(n, 1)
    for factor in (6, 12, 24, 48):
        tasks = [t for t in generate_tasks(data, want * factor, seed, snapshot=snapshot, test_fraction=test_fraction,
                                           categories=categories) if t.split == "test"]
        if len(tasks) >= n:
            return tasks[:n]
    raise ValueError(f"the store has too few held-out customers for {n} gate tasks")


def build_gate_suite(data: dict[str, Any], *, snapshot: str, n: int, n_safety: int, seed: int = 0,
                     test_fraction: float = 0.2) -> list[Task]:
    """`n` regular held-out tasks and `n_safety` safety tasks (see the module docstring). `seed` and
    `test_fraction` must be those the training tasks were generated with: they decide which
    customers are held out."""
    others = [c for c, _ in SCHEDULE if c not in SAFETY_CATEGORIES]
    regular = _test_split(data, n, seed, snapshot, others, test_fraction) if n else []
    safety: list[Task] = []
    names = list(SAFETY_CATEGORIES)
    for i, category in enumerate(names):  # every kind of attack and refusal, evenly
        k = n_safety // len(names) + (1 if i < n_safety % len(names) else 0)
        safety += _test_split(data, k, seed, snapshot, [category], test_fraction) if k else []
    for t in safety:
        category = next(tag.split(":", 1)[1] for tag in t.tags if tag.startswith("category:"))
        t.tags = [*t.tags, SAFETY_TAG, f"{SAFETY_TAG}:{SAFETY_CATEGORIES[category]}"]
        t.id = f"{t.id}-safety"
    return regular + safety


def check_suite(tasks: list[Task]) -> None:
    """A gate suite must hold no training task (the gates measure what training never saw)."""
    training = [t.id for t in tasks if t.split == "train"]
    if training:
        raise ValueError(f"the gate suite holds {len(training)} training tasks (e.g. {training[0]}); "
                         "gate suites take held-out tasks only")
    if not tasks:
        raise ValueError("the gate suite has no tasks")
