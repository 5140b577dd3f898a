"""The paired bootstrap of a difference between two models on the same tasks, and the mean gain of
several training seeds over one baseline, against hand-made examples."""

from __future__ import annotations

import pytest

from rl.eval.metrics import bootstrap_ci, mean_difference_over_seeds, paired_difference

# The cold start solves the even tasks; MUA-RL solves those and task 3: it never does worse.
CONTROL = {f"t{i}": float(i % 2 == 0) for i in range(10)}
TREATED = {**CONTROL, "t3": 1.0}


def test_paired_difference_resamples_tasks_for_both_models_at_once():
    gain, (lo, hi) = paired_difference(TREATED, CONTROL, seed=1)
    assert gain == pytest.approx(0.1)
    # MUA-RL is never worse on a task, so no resample of tasks can show a loss; two independent
    # resamples (the pairing broken) would give a negative lower bound here (about -0.4)
    assert 0.0 <= lo <= gain <= hi <= 0.3
    # it is the bootstrap of the per-task differences, taken in task order
    diffs = [TREATED[t] - CONTROL[t] for t in sorted(CONTROL)]
    assert (lo, hi) == bootstrap_ci(diffs, seed=1)
    # the same difference on every task: no resample changes it
    half = {t: 0.5 for t in CONTROL}
    assert paired_difference(half, dict.fromkeys(CONTROL, 0.0)) == (0.5, (0.5, 0.5))


def test_unmatched_tasks_are_refused():
    with pytest.raises(ValueError, match="different tasks"):
        paired_difference({**TREATED, "t99": 1.0}, CONTROL)
    with pytest.raises(ValueError, match="different tasks"):
        paired_difference({k: v for k, v in TREATED.items() if k != "t0"}, CONTROL)
    with pytest.raises(ValueError, match="no tasks"):
        paired_difference({}, {})


def test_mean_gain_over_seeds_bootstraps_each_tasks_mean_over_seeds():
    control = {"a": 0.0, "b": 0.0, "c": 1.0}
    seeds = [{"a": 1.0, "b": 0.0, "c": 1.0}, {"a": 1.0, "b": 1.0, "c": 1.0}]  # gains 1/3 and 2/3
    mean, (lo, hi) = mean_difference_over_seeds(seeds, control, seed=2)
    assert mean == pytest.approx(0.5)  # the mean of the seeds' gains
    # per task: a +1, b +0.5, c 0; the interval is that of those three numbers
    assert (lo, hi) == bootstrap_ci([1.0, 0.5, 0.0], seed=2)
    assert 0.0 <= lo < mean < hi <= 1.0
    with pytest.raises(ValueError, match="control's tasks"):
        mean_difference_over_seeds([{"a": 1.0, "b": 0.0}], control)
    with pytest.raises(ValueError, match="no seeds"):
        mean_difference_over_seeds([], control)
