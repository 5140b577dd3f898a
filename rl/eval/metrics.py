"""pass^k with bootstrap confidence intervals, plain means with intervals, and paired differences.

pass^k (tau-bench): with n valid trials of a task and c successes, the chance that k trials drawn
without replacement all succeed is C(c, k) / C(n, k); pass^k is its mean over tasks. Tasks with
fewer than k valid trials are left out of pass^k for that k. Intervals are percentile bootstraps
over tasks (resampled with replacement, seeded, so a summary is reproducible).

Two models played on the same tasks are compared by a paired bootstrap (`paired_difference`):
each resample draws tasks and takes both models' results on those same tasks, so the interval is
that of the per-task difference, much narrower than two independent intervals when the models
succeed and fail on the same tasks. Several training seeds against one baseline
(`mean_difference_over_seeds`) are compared through each task's mean over seeds.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from math import comb


def pass_hat_k_task(n: int, c: int, k: int) -> float:
    if k > n or n <= 0:
        raise ValueError(f"pass^{k} needs at least {k} trials (got {n})")
    return comb(c, k) / comb(n, k)


def pass_hat_k(results: Sequence[tuple[int, int]], k: int) -> float | None:
    """Mean of C(c,k)/C(n,k) over tasks given as (n, c); None when no task has k trials."""
    vals = [pass_hat_k_task(n, c, k) for n, c in results if n >= k]
    return sum(vals) / len(vals) if vals else None


def bootstrap_ci(values: Sequence[float], *, iterations: int = 1000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of `values`."""
    if not values:
        return None
    if len(values) == 1:
        return (values[0], values[0])
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(iterations))
    lo = means[int((1 - level) / 2 * iterations)]
    hi = means[min(iterations - 1, int((1 + level) / 2 * iterations))]
    return (lo, hi)


def pass_hat_k_with_ci(results: Sequence[tuple[int, int]], k: int, *, iterations: int = 1000,
                       seed: int = 0) -> tuple[float | None, tuple[float, float] | None]:
    vals = [pass_hat_k_task(n, c, k) for n, c in results if n >= k]
    if not vals:
        return None, None
    return sum(vals) / len(vals), bootstrap_ci(vals, iterations=iterations, seed=seed)


def paired_difference(treated: Mapping[str, float], control: Mapping[str, float], *, iterations: int = 1000,
                      seed: int = 0, level: float = 0.95) -> tuple[float, tuple[float, float]]:
    """Mean over tasks of `treated[t] - control[t]` (both keyed by task id) and its paired percentile
    bootstrap interval: a resample of tasks is applied to both models at once. The two must hold the
    same tasks (ValueError otherwise): a difference between unmatched tasks is not a paired one."""
    if set(treated) != set(control):
        only = sorted(set(treated) ^ set(control))
        raise ValueError(f"paired difference over different tasks ({len(only)} unmatched, e.g. {only[0]!r})")
    if not treated:
        raise ValueError("paired difference over no tasks")
    diffs = [treated[t] - control[t] for t in sorted(treated)]
    ci = bootstrap_ci(diffs, iterations=iterations, seed=seed, level=level)
    assert ci is not None
    return sum(diffs) / len(diffs), ci


def mean_difference_over_seeds(runs: Sequence[Mapping[str, float]], control: Mapping[str, float], *,
                               iterations: int = 1000, seed: int = 0,
                               level: float = 0.95) -> tuple[float, tuple[float, float]]:
    """The mean gain of several training seeds' models (`runs`, each keyed by task id) over one
    `control`, with an interval: per task, the mean over seeds of its result minus the control's,
    then `paired_difference` of those against zero, i.e. a bootstrap over tasks of the per-task
    mean-over-seeds difference. The mean equals the mean of the seeds' own gains; the interval
    covers the sampling of tasks with the seeds held fixed (with three seeds a bootstrap over seeds
    says little), so the spread between seeds is to be read from the seeds' gains themselves."""
    if not runs:
        raise ValueError("no seeds to average")
    for r in runs:
        if set(r) != set(control):
            raise ValueError("every seed must be scored on the control's tasks")
    per_task = {t: sum(r[t] for r in runs) / len(runs) for t in control}
    return paired_difference(per_task, dict(control), iterations=iterations, seed=seed, level=level)
