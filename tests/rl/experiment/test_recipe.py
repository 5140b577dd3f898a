"""Recipe settings changed from the command line: dotted keys, JSON values, clear errors; and
cpu-tiny as its deciding dev reading measured it."""

import json
from pathlib import Path

import pytest

from rl.experiment.recipe import get_recipe, with_overrides


def test_overrides_reach_nested_settings_and_rename_the_recipe():
    base = get_recipe("cpu-tiny")
    r = with_overrides(base, ["grpo.steps=36", 'rl_mix=["cancel","cancel","info_status"]', "max_turns=16",
                              "model.hidden_size=256", "system_prompt=Be brief."])
    assert r.grpo.steps == 36 and r.grpo.lr == base.grpo.lr  # the rest of a nested setting is kept
    assert r.rl_mix == ["cancel", "cancel", "info_status"] and r.max_turns == 16
    assert r.model.hidden_size == 256 and r.system_prompt == "Be brief."
    assert r.name.startswith("cpu-tiny+grpo.steps=36,")
    assert with_overrides(base, []) is base and base.grpo.steps != 36  # the registered recipe is untouched


@pytest.mark.parametrize(("setting", "message"), [
    ("grpo.stepz=3", "unknown setting 'grpo.stepz'"),
    ("nope.steps=3", "unknown setting 'nope.steps'"),
    ("name=x", "unknown setting 'name'"),
    ("grpo.steps", "is not KEY=VALUE"),
    ("grpo.steps=many", "invalid setting grpo.steps"),
    ("grpo.loss_agg=seq-sum", "invalid setting grpo.loss_agg"),
    ("n_val_tasks=48,validate_every=5", "invalid settings: Value error, validate_every"),
    ("n_val_tasks=-1", "invalid setting n_val_tasks"),
])
def test_bad_overrides_are_clear_errors(setting, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.").replace("(", r"\(")):
        with_overrides(get_recipe("cpu-tiny"), setting.split(","))


def test_validation_is_off_in_cpu_tiny_and_then_any_interval_goes():
    r = with_overrides(get_recipe("cpu-tiny"), ["validate_every=5"])
    assert r.n_val_tasks == 0 and r.validate_every == 5
    assert get_recipe("smoke").n_val_tasks > 0  # the test suite runs the selection end to end


def test_place_refs_show_every_street_and_city_the_store_and_the_tasks_use():
    from backend.store.seed_catalog import CITIES, STREET_NAMES
    from rl.tasks import goals

    plain = get_recipe("cpu-tiny").view_with_names([])
    assert not plain.places and "<place_1>" not in plain.extra_tokens  # off: the committed vocabulary
    view = with_overrides(get_recipe("cpu-tiny"), ["place_refs=true"]).view_with_names([])
    assert set(STREET_NAMES) | set(goals.STREETS) | {c for c, _, _ in CITIES + tuple(goals.CITIES)} == view.places
    assert not view.places & view.names and "<place_8>" in view.extra_tokens
    assert view.conversation().show("12 Oak Street, Salt Lake City") == "12 <place_1>, <place_2>"


def test_the_command_takes_seeds_and_refuses_bad_settings_before_running(tmp_path):
    import typer
    from typer.testing import CliRunner

    from rl.cli import register

    app = typer.Typer()
    register(app)
    run = CliRunner().invoke
    bad = run(app, ["experiment", "paper-table", "--recipe", "smoke", "--out", str(tmp_path / "a"), "--seeds", "2",
                    "--set", "eval_set=train"])
    assert bad.exit_code == 2 and "invalid setting eval_set" in bad.output
    assert run(app, ["experiment", "paper-table", "--out", str(tmp_path / "b"), "--seeds", "0"]).exit_code == 2
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    r = with_overrides(get_recipe("smoke"), ["seeds=4", "task_seed=7"])
    assert (r.seeds, r.task_seed, r.test_task_seed) == (4, 7, 23)


def test_cpu_tiny_is_the_recipe_its_dev_reading_measured():
    """cpu-tiny takes every setting of the dev run that decided it (`dev-reason-calls`, session 48):
    its committed recipe.json, less the dev protocol's own settings, is cpu-tiny's recipe."""
    measured = json.loads((Path(__file__).parents[3] / "bench/results/dev-reason-calls/recipe.json").read_text())
    tiny = get_recipe("cpu-tiny").model_dump(mode="json")
    protocol = {"name", "eval_set", "ablation_seeds", "eval_trials", "seeds"}  # how a dev reading runs
    # how fast, not what: evaluations decode 64 conversations at once since session 48 (the same
    # passes at 32 and 64, bench/eval_concurrency_bench.py)
    speed = {"eval_concurrency"}
    differ = {k: (v, tiny.get(k)) for k, v in measured.items() if k not in protocol | speed and tiny.get(k) != v}
    assert differ == {}
    assert measured["eval_concurrency"] == 32 and tiny["eval_concurrency"] == 64
    assert measured["grpo"]["anchor_coef"] == 1.0 and measured["train_customer"] == "wide"
    assert measured["refused_not_again"] and measured["eval_customers"] == ["heldout-known", "varied"]
    assert measured["reason_follows_proposal"]


def test_refused_not_again_reaches_the_view_only_with_the_proposal_template():
    tiny = get_recipe("cpu-tiny")  # on since session 47 (`dev-refused`)
    off = with_overrides(tiny, ["refused_not_again=false"])
    on = with_overrides(off, ["refused_not_again=true"])
    assert on.view.refused_not_again and tiny.view.refused_not_again and not off.view.refused_not_again
    assert not with_overrides(on, ["proposal_template=false"]).view.refused_not_again


def test_reason_follows_proposal_reaches_the_view_only_with_the_proposal_template():
    tiny = get_recipe("cpu-tiny")  # on since session 48 (`dev-reason-calls`)
    off = with_overrides(tiny, ["reason_follows_proposal=false"])
    on = with_overrides(off, ["reason_follows_proposal=true"])
    assert on.view.reason_follows_proposal and tiny.view.reason_follows_proposal
    assert not off.view.reason_follows_proposal
    assert not with_overrides(on, ["proposal_template=false"]).view.reason_follows_proposal


def test_no_item_refs_in_text_reaches_the_view_only_with_shown_refs_in_text_and_without_item_refs():
    on = with_overrides(get_recipe("cpu-tiny"), ["no_item_refs_in_text=true"])
    assert on.view.no_item_refs_in_text
    assert not with_overrides(on, ["no_item_refs_in_text=false"]).view.no_item_refs_in_text
    assert not with_overrides(on, ["shown_refs_in_text=false"]).view.no_item_refs_in_text
    assert not with_overrides(on, ["item_refs=true"]).view.no_item_refs_in_text  # items named by reference


def test_status_answers_reach_the_view_only_with_proposals_by_status():
    on = with_overrides(get_recipe("cpu-tiny"), ["status_answers=true"])
    assert on.view.status_answers and not get_recipe("cpu-tiny").view.status_answers
    assert not with_overrides(on, ["proposals_by_status=false"]).view.status_answers


def test_refusals_by_status_reach_the_view_only_with_proposals_by_status():
    on = with_overrides(get_recipe("cpu-tiny"), ["refusals_by_status=true"])
    assert on.view.refusals_by_status and not get_recipe("cpu-tiny").view.refusals_by_status
    assert not with_overrides(on, ["proposals_by_status=false"]).view.refusals_by_status
