"""The real miniature paper experiment (recipe cpu-tiny) as a benchmark: excluded from `make test`
(`pytest -m benchmark tests/rl/experiment` runs it, about an hour on two cores). It checks the
time limit, the contract and the issue's targets: cold start above base, MUA-RL at least 10 points
above cold start in pass^1, static queries below MUA-RL on goal-shift tasks. The committed run is
under bench/results/paper-table."""

import json

import pytest

from rl.experiment.paper_table import ROWS, Experiment
from rl.experiment.recipe import get_recipe


@pytest.mark.benchmark
def test_cpu_tiny_paper_table(test_dbs, tau_data_dir, tmp_path):
    table = Experiment(get_recipe("cpu-tiny"), tmp_path / "paper", server_url=test_dbs.server_url,
                       data_dir=tau_data_dir, command="pytest -m benchmark tests/rl/experiment").run()
    rows = table["rows"]
    print(json.dumps({"pass1": {k: v["pass1"] for k, v in rows.items()}, "minutes": table["wall_seconds"] / 60}))
    assert set(rows) == set(ROWS) and table["n_eval_tasks"] >= 100
    assert table["wall_seconds"] < 3600
    assert rows["cold_start"]["pass1"] > rows["base"]["pass1"], "the cold start must beat the base model"
    assert rows["mua_rl"]["pass1"] >= rows["cold_start"]["pass1"] + 0.10, \
        "MUA-RL must be at least 10 points above the cold start in pass^1"
    shift = {row: rows[row]["by_tag"].get("goal_shift") for row in ("static_query", "mua_rl")}
    assert shift["mua_rl"] is not None and shift["mua_rl"]["n"] > 0, "the held-out set must have goal-shift tasks"
    assert (shift["static_query"] or {"pass1": 0.0})["pass1"] < shift["mua_rl"]["pass1"], \
        "static queries must score below MUA-RL on goal-shift tasks"
