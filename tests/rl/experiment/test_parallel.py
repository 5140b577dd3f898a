"""The schedule of the experiment's GRPO runs and evaluations (rl/experiment/parallel.py): what
starts when. Each worker's share of the server's connections is tested with the pool's
(tests/rl/env/test_connection_budget.py); the workers themselves run in the smoke pipeline
(tests/rl/experiment/test_paper_table.py)."""

from rl.experiment.parallel import Job, chain_cost, next_job, training_and_evaluation_jobs


def test_each_grpo_run_starts_from_its_model_and_each_row_is_evaluated_after_its_training():
    jobs = {j.stage: j.needs for j in training_and_evaluation_jobs()}
    assert jobs == {"eval_base": "base_model", "eval_cold_start": "sft",
                    "grpo_mua_rl": "sft", "eval_mua_rl": "grpo_mua_rl",
                    "grpo_no_cold_start": "base_model", "eval_no_cold_start": "grpo_no_cold_start",
                    "grpo_static_query": "sft", "eval_static_query": "grpo_static_query"}


def test_longest_chain_first_and_nothing_before_its_input():
    jobs = training_and_evaluation_jobs()
    assert chain_cost(jobs, "grpo_mua_rl") == 11.0 and chain_cost(jobs, "eval_base") == 1.0
    # right after the base model only the base model's stages are ready: its GRPO run goes first
    assert next_job(jobs, {"base_model"}, set()).stage == "grpo_no_cold_start"
    assert next_job(jobs, {"base_model"}, {"grpo_no_cold_start"}).stage == "eval_base"
    assert next_job(jobs, {"base_model"}, {"grpo_no_cold_start", "eval_base"}) is None
    # with the cold start too, the GRPO runs (in row order) before any evaluation
    order, started, finished = [], set(), {"base_model", "sft"}
    while (job := next_job(jobs, finished, started)) is not None:
        order.append(job.stage)
        started.add(job.stage)
        finished.add(job.stage)
    assert order[:3] == ["grpo_mua_rl", "grpo_no_cold_start", "grpo_static_query"]
    assert sorted(order[3:]) == sorted(j.stage for j in jobs if j.stage.startswith("eval_"))
    # finished stages are not started again
    assert next_job([Job("eval_base", "base_model")], {"base_model", "eval_base"}, set()) is None
