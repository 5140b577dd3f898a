"""The real miniature paper experiment (recipe cpu-tiny) as a benchmark: excluded from `make test`
(`pytest -m benchmark tests/rl/experiment` runs it, 70-95 minutes on two cores). It checks the
time limit, the contract and the issue's targets on the frozen test set with the held-out customer:
cold start above base, MUA-RL's mean gain over the cold start in pass^1 at least 10 points over
its seeds, every seed at least 5, the interval of the mean above 0, static queries below MUA-RL on
goal-shift tasks. The committed run is under bench/results/paper-table."""

import json

import pytest

from rl.experiment.paper_table import ROWS, Experiment
from rl.experiment.recipe import get_recipe


@pytest.mark.benchmark
def test_cpu_tiny_paper_table(test_dbs, tau_data_dir, tmp_path):
    recipe = get_recipe("cpu-tiny")
    table = Experiment(recipe, tmp_path / "paper", server_url=test_dbs.server_url,
                       data_dir=tau_data_dir, command="pytest -m benchmark tests/rl/experiment").run()
    rows = table["rows"]
    print(json.dumps({"pass1": {k: v["pass1"] for k, v in rows.items()}, "seeds": table["seeds"],
                      "gain_mean": table["gain_mean"], "gain_ci95": table["gain_ci95"],
                      "minutes": table["wall_seconds"] / 60}))
    assert set(rows) == set(ROWS) and table["n_eval_tasks"] >= 100 and table["eval_set"] == "test"
    assert table["eval_customer"] == recipe.eval_customers[0] and len(table["seeds"]) == recipe.seeds == 3
    assert table["wall_seconds"] < 90 * 60
    assert rows["cold_start"]["pass1"] > rows["base"]["pass1"], "the cold start must beat the base model"
    assert table["gain_mean"] >= 0.10, "MUA-RL must gain at least 10 points over the cold start on average"
    assert all(s["gain"] >= 0.05 for s in table["seeds"]), "every seed must gain at least 5 points"
    assert table["gain_ci95"][0] > 0, "the interval of the mean gain must lie above 0"
    shift = {row: rows[row]["by_tag"].get("goal_shift") for row in ("static_query", "mua_rl")}
    assert shift["mua_rl"] is not None and shift["mua_rl"]["n"] > 0, "the test set must have goal-shift tasks"
    assert (shift["static_query"] or {"pass1": 0.0})["pass1"] < shift["mua_rl"]["pass1"], \
        "static queries must score below MUA-RL on goal-shift tasks"
