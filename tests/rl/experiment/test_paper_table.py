"""The whole paper-table pipeline at toy sizes (the `smoke` recipe): tasks, cold-start data, base
model, SFT, three GRPO runs and five evaluations on real sandboxes, then the table's contract."""

import json

import pytest

from rl.experiment.paper_table import ROWS, Experiment, build_task_sets, customer_bucket, round_robin
from rl.experiment.recipe import get_recipe


def test_smoke_pipeline_writes_the_table_contract(test_dbs, tau_data_dir, tmp_path):
    recipe = get_recipe("smoke")
    out = tmp_path / "paper"
    table = Experiment(recipe, out, server_url=test_dbs.server_url, data_dir=tau_data_dir,
                       command="muarl experiment paper-table --recipe smoke").run()
    on_disk = json.loads((out / "table.json").read_text())
    assert on_disk == json.loads(json.dumps(table))
    assert set(on_disk["rows"]) == set(ROWS)
    assert on_disk["n_eval_tasks"] == recipe.n_eval_tasks and isinstance(on_disk["wall_seconds"], float)
    assert on_disk["command"] == "muarl experiment paper-table --recipe smoke"
    for r in on_disk["rows"].values():
        assert isinstance(r["pass1"], float) and isinstance(r["tcr"], float) and 0 <= r["pass1"] <= 1
        assert r["by_tag"] and all(isinstance(v["n"], int) and isinstance(v["pass1"], float)
                                   for v in r["by_tag"].values())
    assert (out / "table.md").read_text().count("\n| ") >= len(ROWS)
    assert (out / "plots" / "sft_loss.png").stat().st_size > 0 and (out / "plots" / "grpo_curves.png").exists()
    assert (out / "plots" / "grpo_reward_by_category.png").stat().st_size > 0
    assert json.loads((out / "grpo" / "mua_rl" / "metrics.jsonl").read_text().splitlines()[0])["reward_by_category"]
    # why failed episodes failed, per row: every failed episode shows at least one cause
    failures = json.loads((out / "failures.json").read_text())
    assert set(failures) == set(ROWS)
    for row, r in on_disk["rows"].items():
        n_failed = round((1 - r["pass1"]) * recipe.n_eval_tasks) - r["excluded"]
        assert sum(failures[row].values()) >= n_failed
    assert "| cause |" in (out / "failures.md").read_text()
    import typer
    from typer.testing import CliRunner

    from rl.cli import register

    app = typer.Typer()
    register(app)
    (out / "failures.json").unlink()
    result = CliRunner().invoke(app, ["experiment", "failures", "--out", str(out)])
    assert result.exit_code == 0 and json.loads((out / "failures.json").read_text()) == failures
    assert CliRunner().invoke(app, ["experiment", "failures", "--out", str(tmp_path / "none")]).exit_code == 2
    # the models carry the view they were trained with: references, and the names they stand for
    from rl.chat.views import ChatView
    from rl.models.tokenizer import load_tokenizer

    view = ChatView.from_manifest(json.loads((out / "models" / "mua_rl" / "manifest.json").read_text())["view"])
    assert view.refs and "Abigail" in view.names and view.tools == tuple(recipe.tools)
    assert len(load_tokenizer(out / "models" / "mua_rl").encode("<order_7>", add_special_tokens=False)) == 1
    # the task sets never share a customer
    from rl.tasks.schema import load_tasks

    sets = {n: load_tasks(out / "tasks" / f"{n}.json") for n in ("cold_start", "rl", "eval")}
    for name, ts in sets.items():
        assert {customer_bucket(t.customer.user_id) for t in ts} == {name}
        assert len({(t.customer.user_id, json.dumps([a.model_dump() for a in t.gold_actions])) for t in ts}) == len(ts)
    assert not any("goal_shift" in t.tags or "haggle" in t.tags for t in sets["cold_start"])
    # validation: RL-side customers that no RL task uses; each GRPO run ships its best validated model
    val = load_tasks(out / "tasks" / "val.json")
    assert len(val) == recipe.n_val_tasks and {customer_bucket(t.customer.user_id) for t in val} == {"rl"}
    assert not {t.customer.user_id for t in val} & {t.customer.user_id for t in sets["rl"]}
    for row in ("mua_rl", "no_cold_start", "static_query"):
        scores = [json.loads(x) for x in (out / "grpo" / row / "validation.jsonl").read_text().splitlines()]
        assert [x["step"] for x in scores] == [0, 1] and all(x["n"] + x["excluded"] == len(val) for x in scores)
        best = max(scores, key=lambda x: (x["reward"], x["step"]))
        selection = json.loads((out / "models" / row / "manifest.json").read_text())["training"]["selection"]
        assert selection["step"] == best["step"] == on_disk["selection"][row]["step"]
        assert f"{row} ships step {best['step']}" in (out / "table.md").read_text()
    # a second run finds every stage done, only rebuilds the table and says that it reused them
    assert table["reused_stages"] == [] and "Resumed" not in (out / "table.md").read_text()
    again = Experiment(recipe, out, server_url=test_dbs.server_url, data_dir=tau_data_dir, command="again").run()
    assert again["rows"] == table["rows"]
    assert again["reused_stages"] == ["tasks", "cold_start_data", "base_model", "sft", "eval_base", "eval_cold_start",
                                      *[s for r in ROWS[2:] for s in (f"grpo_{r}", f"eval_{r}")]]
    assert "Resumed: tasks, cold_start_data" in (out / "table.md").read_text()
    # A stage that fails in a worker stops the run: the error names the stage and carries the
    # worker's traceback, and the workers drop the snapshots and sandboxes they made.
    import asyncio
    import shutil

    from rl.experiment.parallel import StageFailed

    broken = tmp_path / "broken"
    shutil.copytree(out, broken, ignore=shutil.ignore_patterns("eval", "grpo"))
    for row in ROWS[2:]:
        shutil.rmtree(broken / "models" / row)
    (broken / "models" / "base" / "model.safetensors").write_bytes(b"not a model")
    before = asyncio.run(_paper_databases(test_dbs.server_url))
    with pytest.raises(StageFailed, match=r"(?s)stage (eval_base|grpo_no_cold_start) failed in worker \d.*Traceback"):
        Experiment(recipe, broken, server_url=test_dbs.server_url, data_dir=tau_data_dir).run()
    assert asyncio.run(_paper_databases(test_dbs.server_url)) <= before


def test_validation_tasks_cover_the_evaluation_kinds_evenly_on_customers_rl_does_not_use(tau_data_dir):
    from rl.grpo.rollout import task_category
    from rl.tasks.stores import resolve_store

    recipe = get_recipe("cpu-tiny").model_copy(update={"n_val_tasks": 48})
    data = resolve_store(recipe.store, tau_data_dir)
    sets = build_task_sets(recipe, data)
    val, rl_customers = sets["val"], {t.customer.user_id for t in sets["rl"]}
    assert len(val) == recipe.n_val_tasks == 48
    kinds = [task_category(t) for t in val]
    assert {k: kinds.count(k) for k in kinds} == dict.fromkeys(recipe.eval_mix, 8)
    assert all(customer_bucket(t.customer.user_id) == "rl" and t.customer.user_id not in rl_customers for t in val)
    assert "val" not in build_task_sets(recipe.model_copy(update={"n_val_tasks": 0}), data)


def test_round_robin_takes_kinds_in_turn_and_says_which_kind_ran_out():
    by_kind = {"a": ["a1", "a2", "a3"], "b": ["b1"], "c": ["c1", "c2"]}
    assert round_robin(by_kind, ["a", "b", "c"], 4) == ["a1", "b1", "c1", "a2"]
    with pytest.raises(ValueError, match="only 1 tasks of kind 'b' could be generated"):
        round_robin(by_kind, ["a", "b", "c"], 5, what="tasks")
    with pytest.raises(ValueError, match="only 0 items of kind 'd'"):
        round_robin(by_kind, ["d"], 1)


async def _paper_databases(server_url: str) -> set[str]:
    from sqlalchemy import text

    from backend.db.engine import admin_connection

    async with admin_connection(server_url) as admin:
        return set((await admin.execute(text("SELECT datname FROM pg_database WHERE datname LIKE 'paper%'"))).scalars())
