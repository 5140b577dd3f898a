"""Training-curve plots: the per-category reward curves are trailing-window means weighted by
rollouts, and every plot is written from a run folder's metrics."""

import json

import pytest

from rl.experiment.plots import category_curves, plot_curves


def _step(step, **cats):
    return {"step": step, "reward_mean": 0.5, "kl": 0.01, "entropy": 0.2, "response_length": 40, "update_rollouts": 8,
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
    assert sorted(p.name for p in written) == ["grpo_curves.png", "grpo_reward_by_category.png", "sft_loss.png"]
    assert all(p.stat().st_size > 0 for p in written)
