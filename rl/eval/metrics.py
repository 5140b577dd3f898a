"""pass^k with bootstrap confidence intervals, and plain means with intervals.

pass^k (tau-bench): with n valid trials of a task and c successes, the chance that k trials drawn
without replacement all succeed is C(c, k) / C(n, k); pass^k is its mean over tasks. Tasks with
fewer than k valid trials are left out of pass^k for that k. Intervals are percentile bootstraps
over tasks (resampled with replacement, seeded, so a summary is reproducible).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
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
