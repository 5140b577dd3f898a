"""The oracle passes every one of 2,000 generated tasks (three seeds on the synthetic store, one on
the tau retail store) with scripted customers: a correct agent is never failed by the simulated
customer. A customer refusing a proposal that matches its goal shows up here as a failed or
`simulator_contradiction` episode, with its task id."""

from __future__ import annotations

import time

from rl.eval.harness import evaluate
from rl.policies.base import make_policy
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks
from rl.tasks.stores import TAU_RETAIL, resolve_store, synthetic_ref

BATCHES = [(synthetic_ref(0, 200), 11), (synthetic_ref(0, 200), 12), (synthetic_ref(0, 200), 13), (TAU_RETAIL, 14)]
PER_BATCH = 500


async def test_the_oracle_passes_every_generated_task(test_dbs, tau_retail, retail_snapshot):
    tasks = []
    for ref, seed in BATCHES:
        data = tau_retail if ref == TAU_RETAIL else resolve_store(ref)
        tasks += generate_tasks(data, PER_BATCH, seed, snapshot=ref)
    assert len(tasks) >= 2000 and len({t.id for t in tasks}) == len(tasks)
    start = time.perf_counter()
    result = await evaluate(tasks, make_policy("oracle"), ScriptedCustomer(), concurrency=8,
                            server_url=test_dbs.server_url, snapshots={TAU_RETAIL: retail_snapshot})
    print(f"oracle on {len(tasks)} generated tasks: {time.perf_counter() - start:.1f} s")
    failed = [(t.task_id, t.excluded or t.ended_by, t.error) for t in result.trajectories if not t.success]
    assert failed == []
    s = result.summary
    assert s["pass_hat_k"]["1"] == 1.0 and s["excluded"] == {} and s["simulator_failures"] == 0
