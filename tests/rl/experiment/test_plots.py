"""Training-curve plots: the per-category reward curves are trailing-window means weighted by
rollouts, KL is plotted only for steps that made an update, and every plot is written from a run
folder's metrics (a run from before the KL and dynamics metrics still gets its older plots)."""

import json

import pytest

from rl.experiment.plots import category_curves, plot_curves, series


def _step(step, **cats):
    return {"step": step, "reward_mean": 0.5, "kl": 0.01 * step, "kl_coef": 0.01, "kl_target": 0.02, "entropy": 0.2,
            "response_length": 40, "update_rollouts": 8, "frac_all_correct": 0.25, "frac_all_wrong": 0.5,
            "informative_groups": 2, "turns_mean": 6.5, "generic_calls_per_rollout": 0.1,
            "reward_by_category": {c: {"rollouts": n, "reward": r} for c, (n, r) in cats.items()}}


def test_category_curves_are_trailing_means_weighted_by_rollouts():
    ms = [_step(1, cancel=(8, 1.0)), _step(2, cancel=(24, 0.0), shift=(8, 0.5)), _step(3), _step(4, shift=(8, 0.0))]
    curves = category_curves(ms, window=2)
    assert curves["cancel"] == [(1, 1.0), (2, pytest.approx(0.25)), (3, 0.0)]  # step 4's window holds none
    assert curves["shift"] == [(2, 0.5), (3, 0.5), (4, 0.0)]


def test_plot_curves_writes_every_plot(tmp_path):
    (tmp_path / "sft_metrics.jsonl").write_text("".join(json.dumps({"step": i, "loss": 3.0 - i}) + "\n"
                                                        for i in range(3)))
    run = tmp_path / "grpo" / "mua_rl"
    run.mkdir(parents=True)
    run.joinpath("metrics.jsonl").write_text("".join(json.dumps(_step(i, cancel=(8, i / 4))) + "\n"
                                                     for i in range(1, 5)))
    written = plot_curves(tmp_path)
    assert sorted(p.name for p in written) == ["grpo_curves.png", "grpo_dynamics.png", "grpo_kl.png",
                                               "grpo_reward_by_category.png", "sft_loss.png"]
    assert all(p.stat().st_size > 0 for p in written)


def test_kl_points_come_only_from_steps_that_made_an_update():
    ms = [_step(1), {**_step(2), "update_rollouts": 0}, _step(3), {"step": 4, "reward_mean": 0.0}]
    assert series(ms, "kl") == [(1, 0.01), (3, 0.03)]
    assert series(ms, "reward_mean") == [(1, 0.5), (2, 0.5), (3, 0.5), (4, 0.0)]
    assert series(ms, "turns_mean") == [(1, 6.5), (2, 6.5), (3, 6.5)]  # step 4 did not record it


def test_a_run_without_the_dynamics_metrics_gets_its_older_plots(tmp_path):
    run = tmp_path / "grpo" / "old"
    run.mkdir(parents=True)
    run.joinpath("metrics.jsonl").write_text("".join(json.dumps(
        {"step": i, "reward_mean": 0.5, "entropy": 0.2, "response_length": 40}) + "\n" for i in range(1, 4)))
    assert [p.name for p in plot_curves(tmp_path)] == ["grpo_curves.png"]
