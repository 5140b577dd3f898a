"""pass^k and its bootstrap interval against hand-computed values, and the summary's aggregation."""

from __future__ import annotations

import pytest

from rl.env.episode import Trajectory
from rl.eval.metrics import bootstrap_ci, pass_hat_k, pass_hat_k_task, pass_hat_k_with_ci
from rl.eval.summary import summarize, to_markdown
from rl.tasks.build import assemble
from rl.tasks.schema import Customer, Goal


def test_pass_hat_k_per_task_by_hand():
    # 4 trials, 3 successes: pass^1 = 3/4, pass^2 = C(3,2)/C(4,2) = 3/6, pass^3 = 1/4, pass^4 = 0
    assert [pass_hat_k_task(4, 3, k) for k in (1, 2, 3, 4)] == [0.75, 0.5, 0.25, 0.0]
    assert pass_hat_k_task(4, 4, 4) == 1.0
    with pytest.raises(ValueError):
        pass_hat_k_task(2, 1, 3)


def test_pass_hat_k_over_tasks_by_hand():
    results = [(4, 3), (4, 4), (4, 0), (2, 2)]  # the last task has only 2 valid trials
    assert pass_hat_k(results, 1) == pytest.approx((0.75 + 1 + 0 + 1) / 4)
    assert pass_hat_k(results, 2) == pytest.approx((0.5 + 1 + 0 + 1) / 4)
    assert pass_hat_k(results, 3) == pytest.approx((0.25 + 1 + 0) / 3)  # (2, 2) cannot give pass^3
    assert pass_hat_k([(1, 1)], 2) is None


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    values = [1.0] * 30 + [0.0] * 10
    lo, hi = bootstrap_ci(values, seed=3)
    assert (lo, hi) == bootstrap_ci(values, seed=3)
    assert lo < 0.75 < hi and 0.55 < lo and hi < 0.9
    assert bootstrap_ci([1.0] * 5) == (1.0, 1.0)
    assert bootstrap_ci([]) is None
    value, ci = pass_hat_k_with_ci([(2, 2), (2, 0)], 1, seed=1)
    assert value == 0.5 and ci[0] <= 0.5 <= ci[1]


def _task(tid: str, tags: list[str]):
    c = Customer(user_id="u", first_name="A", last_name="B", email="a@b.c", zip="00000")
    return assemble(task_id=tid, snapshot="tau-retail", customer=c, split=None, tags=tags,
                    goals=[Goal(id="g0", kind="info", outcome="info", say="?", answer=["x"])])


def _traj(tid: str, trial: int, reward: float | None, excluded: str | None = None, tcr: float = 1.0):
    return Trajectory(task_id=tid, trial=trial, policy="p", policy_model="p", user="u", user_model="u",
                      user_prompt_version="v", reward=reward, excluded=excluded, tcr=None if excluded else tcr,
                      turns=4, timings_ms={"total": 10.0})


def test_summary_counts_exclusions_apart_and_aggregates_by_tag():
    tasks = [_task("a", ["goal_shift"]), _task("b", ["haggle"])]
    trajs = [_traj("a", 0, 1.0), _traj("a", 1, 0.0, tcr=0.5), _traj("b", 0, 1.0),
             _traj("b", 1, None, "simulator_error")]
    s = summarize(tasks, trajs, trials=2)
    assert s["n_tasks"] == 2 and s["trials"] == 2 and s["n_valid"] == 3
    assert s["excluded"] == {"simulator_error": 1}
    assert s["pass_hat_k"]["1"] == pytest.approx((0.5 + 1.0) / 2)
    assert s["pass_hat_k"]["2"] == pytest.approx(0.0)  # task b has one valid trial: left out of pass^2
    assert s["by_tag"]["goal_shift"] == {"n": 1, "pass_hat_k": {"1": 0.5, "2": 0.0}, "tcr": 0.75}
    assert s["tcr"] == pytest.approx((1 + 0.5 + 1) / 3, abs=1e-4)
    assert "| 1 | 75.0 |" in to_markdown(s)


def test_simulator_failures_are_excluded_and_counted_apart_from_other_exclusions():
    tasks = [_task("a", []), _task("b", []), _task("c", [])]
    trajs = [_traj("a", 0, None, "simulator_contradiction"), _traj("b", 0, None, "policy_timeout"),
             _traj("c", 0, 1.0)]
    s = summarize(tasks, trajs, trials=1)
    assert s["excluded"] == {"simulator_contradiction": 1, "policy_timeout": 1}
    assert s["simulator_failures"] == 1 and s["n_valid"] == 1 and s["pass_hat_k"]["1"] == 1.0
    assert "simulator failures: 1" in to_markdown(s)
