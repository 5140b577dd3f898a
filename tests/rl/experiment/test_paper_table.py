"""The whole paper-table pipeline at toy sizes (the `smoke` recipe): tasks, cold-start data, base
model and SFT once, GRPO for two seeds and the two ablations for one, every model evaluated greedy
and sampled with two customers on real sandboxes, then the table's contract and a resumed run."""

import json

import pytest

from rl.experiment.paper_table import ROWS, Experiment, build_task_sets, customer_bucket, round_robin
from rl.experiment.plan import evaluated_models
from rl.experiment.recipe import get_recipe
from rl.experiment.stages import weights_digest

GRPO_MODELS = ["mua_rl_s0", "mua_rl_s1", "no_cold_start_s0", "static_query_s0"]


def test_smoke_pipeline_writes_the_table_contract(test_dbs, tau_data_dir, tmp_path):
    # with noisy GRPO customers (rl/simulator/noisy.py) who keep their reasons to themselves half the
    # time (rl/simulator/scripted.py): the evaluations never have either; and
    # with the anchor to the cold-start data and the teacher's guides (rl/grpo/trainer.py), which only
    # runs from the cold start get
    smoke = get_recipe("smoke")
    recipe = smoke.model_copy(update={"grpo_customer_noise": 0.3, "grpo_quiet_reasons": 0.5,
                                      "cold_start_quiet_reasons": 0.5,
                                      "grpo": smoke.grpo.model_copy(update={"anchor_coef": 0.5,
                                                                          "guide_failed_groups": True})})
    out = tmp_path / "paper"
    table = Experiment(recipe, out, server_url=test_dbs.server_url, data_dir=tau_data_dir,
                       command="muarl experiment paper-table --recipe smoke").run()
    on_disk = json.loads((out / "table.json").read_text())
    raw = [json.loads(line) for line in (out / "coldstart" / "raw.jsonl").read_text().splitlines()]
    assert {r["meta"]["source"] for r in raw} == {"real_tools:teacher+scripted+quiet0.5"}
    assert on_disk == json.loads(json.dumps(table))
    assert set(on_disk["rows"]) == set(ROWS)
    assert on_disk["n_eval_tasks"] == recipe.n_eval_tasks and isinstance(on_disk["wall_seconds"], float)
    assert on_disk["command"] == "muarl experiment paper-table --recipe smoke"
    assert on_disk["eval_set"] == "test" and on_disk["eval_trials"] == recipe.eval_trials == 2
    # the first evaluation customer gives `rows`; the other's rows are kept beside them
    assert on_disk["eval_customer"] == "heldout" and on_disk["eval_customers"] == recipe.eval_customers
    assert set(on_disk["rows_by_customer"]) == {"heldout", "scripted"}
    assert on_disk["rows_by_customer"]["heldout"] == on_disk["rows"]
    for rows in on_disk["rows_by_customer"].values():
        for r in rows.values():
            assert isinstance(r["pass1"], float) and isinstance(r["tcr"], float) and 0 <= r["pass1"] <= 1
            assert r["by_tag"] and all(isinstance(v["n"], int) and isinstance(v["pass1"], float)
                                       for v in r["by_tag"].values())
            assert r["n_seeds"] == len(r["pass1_by_seed"]) and r["pass1"] == pytest.approx(
                sum(r["pass1_by_seed"]) / r["n_seeds"])
            assert set(r["sampled_pass_hat_k"]) == {"1"}  # one sampled trial beside the greedy one
    rows = on_disk["rows"]
    assert rows["mua_rl"]["n_seeds"] == 2 and rows["no_cold_start"]["n_seeds"] == rows["static_query"]["n_seeds"] == 1
    assert "1 seed (GRPO seed 0), MUA-RL 2" in rows["static_query"]["note"] and "random" in rows["base"]["note"]
    # per seed: pass^1 in 0..1 and the gain over the cold start with its paired interval, then the mean
    assert [x["seed"] for x in on_disk["seeds"]] == [0, 1]
    for x in on_disk["seeds"]:
        assert {"seed", "cold_start", "mua_rl", "gain", "gain_ci95"} <= set(x)
        assert all(isinstance(x[k], float) and 0 <= x[k] <= 1 for k in ("cold_start", "mua_rl"))
        assert x["gain"] == pytest.approx(x["mua_rl"] - x["cold_start"])
        assert x["gain_ci95"][0] <= x["gain"] <= x["gain_ci95"][1]
    assert on_disk["gain_mean"] == pytest.approx(sum(x["gain"] for x in on_disk["seeds"]) / 2)
    lo, hi = on_disk["gain_ci95"]
    assert isinstance(lo, float) and lo <= on_disk["gain_mean"] <= hi
    assert on_disk["n_paired_tasks"] <= recipe.n_eval_tasks
    assert set(on_disk["gains_by_customer"]) == {"heldout", "scripted"}
    # every model, every customer: its greedy and sampled evaluations
    assert set(on_disk["models"]) == {"base", "cold_start", *GRPO_MODELS} == set(evaluated_models(recipe))
    for model in on_disk["models"]:
        for c in ("heldout", "scripted"):
            greedy = json.loads((out / "eval" / model / c / "greedy" / "summary.json").read_text())
            sampled = json.loads((out / "eval" / model / c / "sampled" / "summary.json").read_text())
            assert greedy["trials"] == 1 and sampled["trials"] == 1
            assert on_disk["models"][model][c]["pass1"] == pytest.approx(greedy["pass_hat_k"]["1"] or 0.0)
    md = (out / "table.md").read_text()
    assert md.count("\n| ") >= 2 * len(ROWS) and "MUA-RL over the cold start, `scripted` customer" in md
    assert "| mean of 2 |" in md and "| mua_rl_s1 | scripted |" in md and "w/o cold start" in md
    # the base and the cold start trained once; each GRPO run from its model with its own seed
    assert sorted(p.name for p in (out / "models").iterdir()) == sorted(["base", "cold_start", *GRPO_MODELS])
    assert list(on_disk["stage_seconds"]).count("sft") == 1
    for model, parent, seed in [("mua_rl_s0", "cold_start", 0), ("mua_rl_s1", "cold_start", 1),
                                ("no_cold_start_s0", "base", 0), ("static_query_s0", "cold_start", 0)]:
        manifest = json.loads((out / "models" / model / "manifest.json").read_text())
        assert manifest["parent"] == parent and manifest["training"]["config"]["seed"] == seed
        # quiet reasons for the training customer only; the noise for every GRPO customer
        assert manifest["training"]["user"] == ("scripted-static" if "static" in model else "scripted+quiet0.5") \
            + "+noise0.3"
    # GRPO from the random base: with its weights unchanged it takes the base's evaluation, else its own
    same = weights_digest(out / "models" / "no_cold_start_s0") == weights_digest(out / "models" / "base")
    evaluated = json.loads((out / "eval" / "no_cold_start_s0" / "result.json").read_text())
    assert (evaluated.get("same_weights_as") == "base") == same
    if same:
        assert on_disk["models"]["no_cold_start_s0"] == on_disk["models"]["base"]
    assert (out / "plots" / "sft_loss.png").stat().st_size > 0 and (out / "plots" / "grpo_curves.png").exists()
    assert (out / "plots" / "grpo_reward_by_category.png").stat().st_size > 0
    assert json.loads((out / "grpo" / "mua_rl_s0" / "metrics.jsonl").read_text().splitlines()[0])["reward_by_category"]
    for model, anchored in [("mua_rl_s0", True), ("static_query_s0", True), ("no_cold_start_s0", False)]:
        step = json.loads((out / "grpo" / model / "metrics.jsonl").read_text().splitlines()[0])
        config = json.loads((out / "models" / model / "manifest.json").read_text())["training"]["config"]
        assert config["anchor_coef"] == (0.5 if anchored else 0.0)
        assert (step["anchor_nll"] > 0 and step["anchor_tokens"] > 0) if anchored else step["anchor_nll"] is None
    # the teacher's guides, played once per customer of a run from the cold start
    guides = [json.loads(x) for x in (out / "guides" / "scripted+quiet0.5+noise0.3.jsonl").read_text().splitlines()]
    assert guides and all(g["meta"]["reward"] == 1.0 for g in guides)
    config = json.loads((out / "models" / "mua_rl_s0" / "manifest.json").read_text())["training"]["config"]
    assert config["guide_failed_groups"] is True
    step = json.loads((out / "grpo" / "mua_rl_s0" / "metrics.jsonl").read_text().splitlines()[0])
    assert step["guided_groups"] >= 0 and "guided_groups" not in json.loads(
        (out / "grpo" / "no_cold_start_s0" / "metrics.jsonl").read_text().splitlines()[0])
    # why failed episodes failed, per row: every failed episode shows at least one cause
    failures = json.loads((out / "failures.json").read_text())
    assert set(failures) == set(on_disk["models"])
    for model, by_c in on_disk["models"].items():
        r = by_c["heldout"]
        n_failed = round((1 - r["pass1"]) * recipe.n_eval_tasks) - r["excluded"]
        assert sum(failures[model].values()) >= n_failed
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

    view = ChatView.from_manifest(json.loads((out / "models" / "mua_rl_s1" / "manifest.json").read_text())["view"])
    assert view.refs and "Abigail" in view.names and view.tools == tuple(recipe.tools)
    assert len(load_tokenizer(out / "models" / "mua_rl_s1").encode("<order_7>", add_special_tokens=False)) == 1
    # the task sets never share a customer
    from rl.tasks.schema import load_tasks

    sets = {n: load_tasks(out / "tasks" / f"{n}.json") for n in ("cold_start", "rl", "dev", "test")}
    for name, ts in sets.items():
        assert {customer_bucket(t.customer.user_id) for t in ts} == {name}
        assert len({(t.customer.user_id, json.dumps([a.model_dump() for a in t.gold_actions])) for t in ts}) == len(ts)
    assert not any("goal_shift" in t.tags or "haggle" in t.tags for t in sets["cold_start"])
    # validation: RL-side customers that no RL task uses; each GRPO run ships its best validated model
    val = load_tasks(out / "tasks" / "val.json")
    assert len(val) == recipe.n_val_tasks and {customer_bucket(t.customer.user_id) for t in val} == {"rl"}
    assert not {t.customer.user_id for t in val} & {t.customer.user_id for t in sets["rl"]}
    for row in GRPO_MODELS:
        scores = [json.loads(x) for x in (out / "grpo" / row / "validation.jsonl").read_text().splitlines()]
        assert [x["step"] for x in scores] == [0, 1] and all(x["n"] + x["excluded"] == len(val) for x in scores)
        best = max(scores, key=lambda x: (x["reward"], x["step"]))
        selection = json.loads((out / "models" / row / "manifest.json").read_text())["training"]["selection"]
        assert selection["step"] == best["step"] == on_disk["selection"][row]["step"]
        assert f"{row} ships step {best['step']}" in (out / "table.md").read_text()
    # a second run finds every stage done, only rebuilds the table and says that it reused them
    assert table["reused_stages"] == [] and "Resumed" not in (out / "table.md").read_text()
    stages = ["tasks", "cold_start_data", "base_model", "sft", "eval_base", "eval_cold_start",
              *[s for m in GRPO_MODELS for s in (f"grpo_{m}", f"eval_{m}")]]
    again = Experiment(recipe, out, server_url=test_dbs.server_url, data_dir=tau_data_dir, command="again").run()
    assert again["rows"] == table["rows"] and again["reused_stages"] == stages
    assert "Resumed: tasks, cold_start_data" in (out / "table.md").read_text()
    # An interrupted run (one customer of one model not evaluated yet) continues: only that stage
    # runs, and only for the missing customer.
    import shutil

    kept = (out / "eval" / "mua_rl_s1" / "heldout" / "greedy" / "episodes.jsonl").stat().st_mtime_ns
    (out / "eval" / "mua_rl_s1" / "result.json").unlink()
    shutil.rmtree(out / "eval" / "mua_rl_s1" / "scripted")
    resumed = Experiment(recipe, out, server_url=test_dbs.server_url, data_dir=tau_data_dir, command="again").run()
    assert resumed["reused_stages"] == [s for s in stages if s != "eval_mua_rl_s1"]
    assert set(resumed["stage_seconds"]) == {"cold_start_data", "base_model", "sft", "eval_mua_rl_s1"}
    assert (out / "eval" / "mua_rl_s1" / "scripted" / "greedy" / "summary.json").exists()
    assert (out / "eval" / "mua_rl_s1" / "heldout" / "greedy" / "episodes.jsonl").stat().st_mtime_ns == kept
    assert resumed["rows"] == table["rows"]
    # A stage that fails in a worker stops the run: the error names the stage and carries the
    # worker's traceback, and the workers drop the snapshots and sandboxes they made.
    import asyncio

    from rl.experiment.parallel import StageFailed

    broken = tmp_path / "broken"  # one worker trains mua_rl_s0 while the other fails on the base model
    shutil.copytree(out, broken, ignore=shutil.ignore_patterns("no_cold_start_s0", "mua_rl_s0", "base"))
    shutil.copytree(out / "models" / "base", broken / "models" / "base")
    (broken / "models" / "base" / "model.safetensors").write_bytes(b"not a model")
    before = asyncio.run(_paper_databases(test_dbs.server_url))
    failed = r"(?s)stage (eval_base|grpo_no_cold_start_s0) failed in worker \d.*Traceback"
    with pytest.raises(StageFailed, match=failed):
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


def test_a_task_seed_is_a_fresh_experiment_with_disjoint_customers(tau_data_dir):
    """Another task seed shuffles the customers into other sets and draws other tasks (the test set
    among them); another test task seed changes the test set only. Within an experiment the
    development, test, cold-start, RL and validation customers never meet."""
    from rl.tasks.stores import resolve_store

    recipe = get_recipe("smoke")
    data = resolve_store(recipe.store, tau_data_dir)
    first, other = (build_task_sets(recipe.model_copy(update={"task_seed": s}), data) for s in (0, 5))
    new_test = build_task_sets(recipe.model_copy(update={"test_task_seed": 24}), data)
    ids = {name: {t.id for t in ts} for name, ts in first.items()}
    assert ids["test"] != {t.id for t in other["test"]} and ids["dev"] != {t.id for t in other["dev"]}
    assert ids["test"] != {t.id for t in new_test["test"]} and ids["dev"] == {t.id for t in new_test["dev"]}
    assert {customer_bucket(t.customer.user_id, 5) for t in other["test"]} == {"test"}
    for sets in (first, other, new_test):
        assert len(sets["test"]) == recipe.n_eval_tasks and len(sets["dev"]) == recipe.n_dev_tasks
        customers = {name: {t.customer.user_id for t in ts} for name, ts in sets.items()}
        for a in customers:
            for b in customers:
                assert a == b or not customers[a] & customers[b], (a, b)
    # the evaluation sets hold the evaluation's kinds evenly
    from rl.grpo.rollout import task_category

    assert sorted(task_category(t) for t in first["test"]) == sorted(recipe.eval_mix)


def test_round_robin_takes_kinds_in_turn_and_says_which_kind_ran_out():
    by_kind = {"a": ["a1", "a2", "a3"], "b": ["b1"], "c": ["c1", "c2"]}
    assert round_robin(by_kind, ["a", "b", "c"], 4) == ["a1", "b1", "c1", "a2"]
    assert round_robin(by_kind, ["a", "a", "c"], 4) == ["a1", "a2", "c1", "a3"]  # a kind named twice
    with pytest.raises(ValueError, match="only 1 tasks of kind 'b' could be generated"):
        round_robin(by_kind, ["a", "b", "c"], 5, what="tasks")
    with pytest.raises(ValueError, match="only 0 items of kind 'd'"):
        round_robin(by_kind, ["d"], 1)


async def _paper_databases(server_url: str) -> set[str]:
    """The experiments' databases whose owner process is gone (rl/env/ownership.py): what a dead
    worker left behind. Databases of live processes (other test runs on the same server) are not
    counted."""
    from sqlalchemy import text

    from backend.db.engine import admin_connection
    from rl.env.ownership import database_owner, live_owners

    async with admin_connection(server_url) as admin:
        query = text("SELECT datname FROM pg_database WHERE datname LIKE 'paper%'")
        names = set((await admin.execute(query)).scalars())
        alive = await live_owners(admin)
    return {n for n in names if database_owner(n) not in alive}


def test_a_folder_made_by_another_recipe_is_refused_before_anything_is_written(tau_data_dir, tmp_path):
    """Reusing a folder's task sets for a recipe that would draw others (an `rl_mix` given with
    --set) would run that recipe on this one's tasks: the run and the command refuse, and the folder
    keeps its recipe.json and tasks byte for byte. The same recipe reuses them."""
    import typer
    from typer.testing import CliRunner

    from rl.cli import register
    from rl.experiment.paper_table import StaleRunFolder
    from rl.tasks.stores import resolve_store

    recipe = get_recipe("smoke")
    data = resolve_store(recipe.store, tau_data_dir)
    out = tmp_path / "run"
    first = Experiment(recipe, out, data_dir=tau_data_dir).tasks(data)
    (out / "recipe.json").write_text(recipe.model_dump_json(indent=1))
    again = Experiment(recipe, out, data_dir=tau_data_dir).tasks(data)
    assert {n: [t.id for t in ts] for n, ts in again.items()} == {n: [t.id for t in ts] for n, ts in first.items()}
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    other = recipe.model_copy(update={"rl_mix": ["cancel"] * len(recipe.rl_mix)})
    with pytest.raises(StaleRunFolder, match=r"\(rl, val: made by another recipe"):
        Experiment(other, out, data_dir=tau_data_dir).run()
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["experiment", "paper-table", "--recipe", "smoke", "--out", str(out),
                                      "--data-dir", str(tau_data_dir), "--set", "task_seed=3"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "holds task sets this recipe would not draw" in said, result.output
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
