"""The schedule of the experiment's GRPO runs and evaluations (rl/experiment/parallel.py): what
starts when. Each worker's share of the server's connections is tested with the pool's
(tests/rl/env/test_connection_budget.py); the workers themselves run in the smoke pipeline
(tests/rl/experiment/test_paper_table.py)."""

import multiprocessing
import queue

import pytest
import torch

from rl.experiment.parallel import (
    Job,
    _QueueReporter,
    chain_cost,
    next_job,
    sandboxes_needed,
    training_and_evaluation_jobs,
)
from rl.experiment.plan import grpo_customer
from rl.experiment.recipe import get_recipe

RECIPE = get_recipe("cpu-tiny").model_copy(update={"seeds": 3, "ablation_seeds": 1, "eval_trials": 1})


def test_each_grpo_run_starts_from_its_model_and_each_model_is_evaluated_after_its_training():
    jobs = {j.stage: j.needs for j in training_and_evaluation_jobs(RECIPE)}
    assert jobs == {"eval_base": "base_model", "eval_cold_start": "sft",
                    **{f"grpo_mua_rl_s{s}": "sft" for s in range(3)},
                    **{f"eval_mua_rl_s{s}": f"grpo_mua_rl_s{s}" for s in range(3)},
                    "grpo_no_cold_start_s0": "base_model", "eval_no_cold_start_s0": "grpo_no_cold_start_s0",
                    "grpo_static_query_s0": "sft", "eval_static_query_s0": "grpo_static_query_s0"}
    # a run from the base is evaluated after the base, whose evaluation it takes when its weights are the base's
    waits = {j.stage: j.also for j in training_and_evaluation_jobs(RECIPE) if j.also}
    assert waits == {"eval_no_cold_start_s0": ("eval_base",)}
    # every ablation seed when the recipe asks; GRPO seeds follow grpo.seed
    seeded = RECIPE.model_copy(update={"ablation_seeds": 3, "grpo": RECIPE.grpo.model_copy(update={"seed": 7})})
    stages = {j.stage for j in training_and_evaluation_jobs(seeded)}
    assert {f"grpo_{r}_s{s}" for r in ("mua_rl", "no_cold_start", "static_query") for s in (7, 8, 9)} < stages


def test_longest_chain_first_and_nothing_before_its_input():
    jobs = training_and_evaluation_jobs(RECIPE)
    assert chain_cost(jobs, "grpo_mua_rl_s0") == 11.0 and chain_cost(jobs, "eval_base") == 2.0
    # an evaluation waits for every one of its inputs
    assert next_job(jobs, {"base_model", "grpo_no_cold_start_s0"}, {"eval_base"}) is None
    assert next_job(jobs, {"base_model", "grpo_no_cold_start_s0", "eval_base"}, set()).stage == "eval_no_cold_start_s0"
    # two customers and four trials make an evaluation five times one greedy pass
    assert chain_cost(training_and_evaluation_jobs(RECIPE.model_copy(update={"eval_trials": 4}), 2),
                      "eval_cold_start") == 5.0
    # right after the base model only the base model's stages are ready: its GRPO run goes first
    assert next_job(jobs, {"base_model"}, set()).stage == "grpo_no_cold_start_s0"
    assert next_job(jobs, {"base_model"}, {"grpo_no_cold_start_s0"}).stage == "eval_base"
    assert next_job(jobs, {"base_model"}, {"grpo_no_cold_start_s0", "eval_base"}) is None
    # with the cold start too, the GRPO runs (in row order) before any evaluation
    order, started, finished = [], set(), {"base_model", "sft"}
    while (job := next_job(jobs, finished, started)) is not None:
        order.append(job.stage)
        started.add(job.stage)
        finished.add(job.stage)
    assert order[:5] == ["grpo_mua_rl_s0", "grpo_mua_rl_s1", "grpo_mua_rl_s2", "grpo_no_cold_start_s0",
                         "grpo_static_query_s0"]
    assert sorted(order[5:]) == sorted(j.stage for j in jobs if j.stage.startswith("eval_"))
    # finished stages are not started again
    assert next_job([Job("eval_base", "base_model")], {"base_model", "eval_base"}, set()) is None


def test_a_worker_takes_the_threads_the_parent_gives_it_at_its_next_report():
    before = torch.get_num_threads()
    shares = multiprocessing.get_context("spawn").Array("i", [1, 1])
    events: queue.Queue = queue.Queue()
    try:
        reporter = _QueueReporter(1, events, shares)
        assert torch.get_num_threads() == 1
        shares[1] = 2  # the other worker finished: this one is alone
        reporter.advance(1, step=3)
        assert torch.get_num_threads() == 2
        assert events.get_nowait() == ("advance", 1, 1, {"step": 3})
    finally:
        torch.set_num_threads(before)


def test_grpo_rows_train_with_the_recipes_customer_and_static_query_with_the_static_one():
    assert grpo_customer(RECIPE, "mua_rl") == RECIPE.train_customer == "wide"
    assert grpo_customer(RECIPE, "no_cold_start") == "wide"
    assert grpo_customer(RECIPE, "static_query") == "scripted-static"
    assert grpo_customer(get_recipe("smoke"), "mua_rl") == "scripted"
    with pytest.raises(ValueError):
        RECIPE.model_validate({**RECIPE.model_dump(), "train_customer": "heldout"})


def test_a_worker_takes_only_the_sandboxes_it_can_use():
    # the harness's two per concurrent episode (cpu-tiny evaluates 64 at once), or a step's 64
    # rollouts and the pool's 16 spares, whichever is more
    assert sandboxes_needed(RECIPE) == 2 * 64
    assert sandboxes_needed(RECIPE.model_copy(update={"eval_concurrency": 32})) == 64 + 16
    assert sandboxes_needed(RECIPE.model_copy(update={"eval_concurrency": 48})) == 96
