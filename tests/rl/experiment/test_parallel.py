"""The schedule of the experiment's GRPO runs and evaluations (rl/experiment/parallel.py): what
starts when, and each worker's share of the server's connections. The workers themselves run in
the smoke pipeline (tests/rl/experiment/test_paper_table.py)."""

from sqlalchemy import text

from backend.db.engine import admin_connection
from rl.experiment.parallel import Job, chain_cost, next_job, sandbox_share, training_and_evaluation_jobs


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


async def test_the_workers_together_stay_within_the_servers_connections(test_dbs):
    async with admin_connection(test_dbs.server_url) as admin:
        limit = int(await admin.scalar(text("SHOW max_connections")))
        reserved = int(await admin.scalar(text("SHOW superuser_reserved_connections")))
    for workers in (1, 2, 3):
        share = await sandbox_share(test_dbs.server_url, workers)
        assert share >= 1 and workers * (share + 3) + 12 <= limit - reserved
    assert await sandbox_share(test_dbs.server_url, 1) == limit - reserved - 15
