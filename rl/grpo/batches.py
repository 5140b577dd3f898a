"""Which tasks a GRPO step samples: a draw stratified over task kinds (the generator's `category:`
tag), so that every optimizer step sees several kinds instead of whatever a plain random draw of a
few tasks happens to hold (a step of 8 tasks from a mix of 6 kinds often missed half of them, and
the gains of one kind came with losses in another).

Each kind gets its share of the step in proportion to its share of the task pool (the recipe's RL
mix stays the mix), by systematic sampling: the kinds, in an order shuffled per step, take
consecutive stretches of [0, k) as long as their quotas (k x share), and the k points u, u+1, ...,
u+k-1 (one random offset u in [0, 1)) pick the kinds whose stretches they fall in. Every kind then
gets the whole part of its quota or one more, with its quota as the expectation: a kind whose
quota is at least 1 is in every step, a smaller one in the steps a share of its quota long, and no
kind takes another's place by chance. Within a kind, tasks are drawn without replacement. A pool of
a single kind (or untagged tasks) is a plain random draw, identical to `rng.sample`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def task_kind(task: Any) -> str | None:
    """The generator's category of a task (its `category:NAME` tag), or None."""
    return next((t.split(":", 1)[1] for t in getattr(task, "tags", None) or () if t.startswith("category:")), None)


def stratified_sample(tasks: Sequence[T], k: int, rng: random.Random,
                      kind: Callable[[T], str | None] = task_kind) -> list[T]:
    """`k` distinct tasks of `tasks` (all of them when there are fewer), stratified over `kind`."""
    k = min(k, len(tasks))
    by_kind: dict[str | None, list[T]] = {}
    for t in tasks:
        by_kind.setdefault(kind(t), []).append(t)
    if len(by_kind) < 2:
        return rng.sample(list(tasks), k)
    kinds = sorted(by_kind, key=str)
    rng.shuffle(kinds)
    count = dict.fromkeys(kinds, 0)
    quota = [k * len(by_kind[c]) / len(tasks) for c in kinds]
    offset, end, at = rng.random(), 0.0, 0
    for i in range(k):
        while at < len(kinds) - 1 and offset + i >= end + quota[at]:
            end += quota[at]
            at += 1
        count[kinds[at]] += 1
    chosen: list[T] = []
    for c in kinds:
        chosen += rng.sample(by_kind[c], min(count[c], len(by_kind[c])))
    rng.shuffle(chosen)
    return chosen
