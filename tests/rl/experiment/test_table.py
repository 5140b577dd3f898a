"""The paper table from hand-made evaluation results: rows as means over seeds, the per-seed gains
on paired tasks, the mean gain, notes on rows that are not findings, the evaluation customers, and
the markdown that shows all of it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from rl.experiment.plan import evaluation_customers
from rl.experiment.recipe import get_recipe
from rl.experiment.table import build_table, row_figures, row_notes, seed_gains, table_markdown

RECIPE = get_recipe("smoke").model_copy(update={"seeds": 2, "eval_trials": 2,
                                                "eval_customers": ["scripted-static", "scripted"]})


def _result(by_task: dict[str, float | None], tcr: float = 0.5) -> dict:
    valid = [v for v in by_task.values() if v is not None]
    pass1 = sum(valid) / len(valid)
    return {"pass1": pass1, "pass1_ci95": [0.0, 1.0], "tcr": tcr, "excluded": len(by_task) - len(valid),
            "simulator_failures": 0, "by_tag": {"kind:cancel": {"n": len(by_task), "pass1": pass1}},
            "by_task": by_task,
            "sampled": {"trials": 1, "pass_hat_k": {"1": pass1 / 2}, "pass_hat_k_ci95": {"1": None}}}


COLD = _result({"a": 0.0, "b": 1.0, "c": 0.0, "d": 0.0})
SEED0 = _result({"a": 1.0, "b": 1.0, "c": 0.0, "d": None})  # d excluded: left out of every comparison
SEED1 = _result({"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}, tcr=0.9)


def test_gains_per_seed_and_their_mean_are_on_the_tasks_every_model_played():
    g = seed_gains(COLD, {0: SEED0, 1: SEED1})
    assert g["n_paired_tasks"] == 3
    s0, s1 = g["seeds"]
    assert (s0["seed"], s0["cold_start"], s0["mua_rl"]) == (0, pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert s0["gain"] == pytest.approx(1 / 3) and s1["gain"] == pytest.approx(2 / 3)
    assert g["gain_mean"] == pytest.approx(0.5) and g["gain_ci95"][0] <= 0.5 <= g["gain_ci95"][1]
    assert seed_gains(_result({"a": None, "b": 1.0}), {0: _result({"a": 1.0, "b": None})})["gain_mean"] is None


def test_a_row_of_several_seeds_is_their_mean():
    row = row_figures([SEED0, SEED1])
    assert row["pass1"] == pytest.approx((2 / 3 + 1) / 2) and row["tcr"] == pytest.approx(0.7)
    assert row["pass1_by_seed"] == [pytest.approx(2 / 3), 1.0] and row["n_seeds"] == 2 and row["excluded"] == 1
    assert row["by_tag"]["kind:cancel"] == {"n": 4, "pass1": pytest.approx(5 / 6)}
    assert row["sampled_pass_hat_k"]["1"] == pytest.approx(5 / 12) and "pass1_ci95" not in row
    assert row_figures([COLD])["pass1_ci95"] == [0.0, 1.0]


def _metrics(folder, reward):
    folder.mkdir(parents=True)
    step = {"reward_mean": reward, "rollouts": 4, "update_rollouts": 4 if reward else 0}
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps({**step, "step": i}) for i in (1, 2)) + "\n")


def test_notes_say_which_rows_are_no_finding(tmp_path):
    _metrics(tmp_path / "grpo" / "no_cold_start_s0", 0.0)
    for run in ("mua_rl_s0", "mua_rl_s1", "static_query_s0"):
        _metrics(tmp_path / "grpo" / run, 0.25)
    notes = row_notes(tmp_path, RECIPE)
    assert notes["no_cold_start"].startswith("GRPO from the random base: none of its 8 rollouts earned any reward")
    assert "1 seed (GRPO seed 0), MUA-RL 2" in notes["no_cold_start"]
    assert notes["static_query"] == "1 seed (GRPO seed 0), MUA-RL 2" and "mua_rl" not in notes
    assert "random initialisation" in notes["base"]
    assert "base's evaluation" not in notes["no_cold_start"]
    # a run that kept the base's weights took the base's evaluation (rl/experiment/stages.py), and says so
    (tmp_path / "eval" / "no_cold_start_s0").mkdir(parents=True)
    (tmp_path / "eval" / "no_cold_start_s0" / "result.json").write_text(json.dumps({"same_weights_as": "base"}))
    assert "no_cold_start_s0 kept the base's very weights, so the base's evaluation is its" in \
        row_notes(tmp_path, RECIPE)["no_cold_start"]


def test_the_table_keeps_rows_for_every_customer_and_shows_every_seed(tmp_path):
    other = _result({"a": 0.0, "b": 0.0, "c": 0.0, "d": 0.0})
    models = {"base": other, "cold_start": COLD, "mua_rl_s0": SEED0, "mua_rl_s1": SEED1,
              "no_cold_start_s0": other, "static_query_s0": COLD}
    results = {m: {"scripted-static": r, "scripted": other} for m, r in models.items()}
    notes = {"no_cold_start": "random base: no signal"}
    table = {**build_table(RECIPE, results, ["scripted-static", "scripted"], notes), "n_eval_tasks": 4,
             "wall_seconds": 60.0, "command": "muarl experiment paper-table", "recipe": "smoke"}
    assert table["eval_customer"] == "scripted-static" and table["rows"] == table["rows_by_customer"]["scripted-static"]
    assert table["rows"]["mua_rl"]["pass1"] == pytest.approx(5 / 6) and table["rows"]["no_cold_start"]["note"]
    assert [s["seed"] for s in table["seeds"]] == [0, 1] and table["gain_mean"] == pytest.approx(0.5)
    assert table["gains_by_customer"]["scripted"]["gain_mean"] == 0.0
    assert json.loads(json.dumps(table)) == table
    md = table_markdown(table)
    assert "| 0 | 33.3 | 66.7 | +33.3 |" in md and "| 1 | 33.3 | 100.0 | +66.7 |" in md
    assert "| mean of 2 | 33.3 | 83.3 | **+50.0** |" in md
    assert "| MUA-RL | 2 | 83.3 (66.7, 100.0) |" in md and "- w/o cold start: random base: no signal." in md
    assert "| mua_rl_s1 | scripted | 0.0 [0.0, 100.0] |" in md and "## Rows, `scripted` customer" in md


def test_with_one_trial_per_task_every_model_has_no_empty_column():
    recipe = RECIPE.model_copy(update={"eval_trials": 1})
    models = {"base": COLD, "cold_start": COLD, "mua_rl_s0": SEED0, "mua_rl_s1": SEED1,
              "no_cold_start_s0": COLD, "static_query_s0": COLD}
    results = {m: {"scripted-static": r} for m, r in models.items()}
    table = {**build_table(recipe, results, ["scripted-static"], {}), "n_eval_tasks": 4,
             "wall_seconds": 60.0, "command": "muarl experiment paper-table", "recipe": "smoke"}
    md = table_markdown(table)
    every = md[md.index("## Every model"):].splitlines()
    assert every[2] == "| model | customer | pass^1 greedy [95% CI] | TCR |" and every[3] == "| --- | --- | --- | --- |"
    assert "| mua_rl_s1 | scripted-static | 100.0 [0.0, 100.0] | 90.0 |" in every


def test_an_llm_customer_joins_the_evaluation_when_an_endpoint_is_configured():
    recipe = get_recipe("cpu-tiny")
    customers = ["heldout-known", "varied"]  # since session 47 (`dev-refused`)
    assert recipe.eval_customers == customers
    endpoint = SimpleNamespace(llm_base_url="http://127.0.0.1:8000/v1", llm_model="qwen")
    assert evaluation_customers(recipe, endpoint) == [*customers, "llm:qwen"]
    assert evaluation_customers(recipe, SimpleNamespace(llm_base_url=None, llm_model="qwen")) == customers
    off = recipe.model_copy(update={"llm_customer": False})
    assert evaluation_customers(off, endpoint) == customers


def test_a_recipe_without_ablations_has_no_ablation_rows_jobs_or_notes(tmp_path):
    from rl.experiment.parallel import training_and_evaluation_jobs
    from rl.experiment.plan import evaluated_models

    recipe = RECIPE.model_copy(update={"ablation_seeds": 0})
    assert evaluated_models(recipe) == ["base", "cold_start", "mua_rl_s0", "mua_rl_s1"]
    assert not [j for j in training_and_evaluation_jobs(recipe) if "static" in j.stage or "no_cold" in j.stage]
    for run in ("mua_rl_s0", "mua_rl_s1"):
        _metrics(tmp_path / "grpo" / run, 0.25)
    notes = row_notes(tmp_path, recipe)
    assert set(notes) == {"base"}
    results = {m: {"scripted": r} for m, r in
               {"base": COLD, "cold_start": COLD, "mua_rl_s0": SEED0, "mua_rl_s1": SEED1}.items()}
    table = {**build_table(recipe, results, ["scripted"], notes), "n_eval_tasks": 4, "wall_seconds": 1.0,
             "command": "c", "recipe": "smoke"}
    assert list(table["rows"]) == ["base", "cold_start", "mua_rl"] and table["gain_mean"] == pytest.approx(0.5)
    assert "static query" not in table_markdown(table)
