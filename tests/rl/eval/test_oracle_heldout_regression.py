"""The oracle passes the generated tasks with the held-out evaluation customer, the varied training
customer and the static-query customer, as it does with the training customer (test_oracle_regression.py): a few
hundred tasks covering every category on the synthetic and the tau retail store. A held-out wording
the oracle cannot read shows up here as a failed episode, a customer refusing a proposal of its own
goal as `simulator_contradiction`."""

from __future__ import annotations

import time

from rl.eval.harness import evaluate
from rl.policies.base import make_policy
from rl.simulator.heldout import HeldOutCustomer
from rl.simulator.static import StaticCustomer
from rl.simulator.varied import VariedCustomer
from rl.tasks.generator import SCHEDULE, generate_tasks
from rl.tasks.stores import TAU_RETAIL, resolve_store, synthetic_ref

PER_STORE = 5 * len(SCHEDULE)  # every category five times on each store


def _show(trajectories, n: int = 3) -> None:
    """The conversations of the first failed episodes, to see which words were not understood."""
    for t in [t for t in trajectories if not t.success][:n]:
        print(f"--- {t.task_id} trial {t.trial}: {t.excluded or t.ended_by} {t.criteria}")
        for m in t.messages[1:]:
            calls = [(c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or []]
            print(f"  {m['role']}: {m.get('content') or ''} {calls or ''}"[:400])


def _tasks(tau_retail):
    tasks = generate_tasks(resolve_store(synthetic_ref(0, 200)), PER_STORE, 31, snapshot=synthetic_ref(0, 200))
    tasks += generate_tasks(tau_retail, PER_STORE, 32, snapshot=TAU_RETAIL)
    assert len({t.id for t in tasks}) == len(tasks) == 2 * PER_STORE
    assert {c.split(":", 1)[1] for t in tasks for c in t.tags if c.startswith("category:")} == {c for c, _ in SCHEDULE}
    return tasks


async def test_the_oracle_passes_every_task_with_the_held_out_customer(test_dbs, tau_retail, retail_snapshot):
    tasks = _tasks(tau_retail)
    start = time.perf_counter()
    result = await evaluate(tasks, make_policy("oracle"), HeldOutCustomer(), trials=2, concurrency=8,
                            server_url=test_dbs.server_url, snapshots={TAU_RETAIL: retail_snapshot})
    s = result.summary
    print(f"oracle, held-out customer, {len(result.trajectories)} episodes: {time.perf_counter() - start:.1f} s, "
          f"excluded {s['excluded']}")
    failed = [(t.task_id, t.excluded or t.ended_by, t.error) for t in result.trajectories if not t.success]
    _show(result.trajectories)
    assert failed == []
    assert s["pass_hat_k"]["1"] == 1.0 and s["excluded"] == {} and s["simulator_failures"] == 0


async def test_the_oracle_passes_every_task_with_the_varied_training_customer(test_dbs, tau_retail, retail_snapshot):
    result = await evaluate(_tasks(tau_retail), make_policy("oracle"), VariedCustomer(), concurrency=8,
                            server_url=test_dbs.server_url, snapshots={TAU_RETAIL: retail_snapshot})
    failed = [(t.task_id, t.excluded or t.ended_by, t.error) for t in result.trajectories if not t.success]
    _show(result.trajectories)
    assert failed == []
    assert result.summary["excluded"] == {} and result.summary["simulator_failures"] == 0


async def test_the_static_oracle_passes_every_task_with_the_static_customer(test_dbs, tau_retail, retail_snapshot):
    tasks = _tasks(tau_retail)
    result = await evaluate(tasks, make_policy("oracle:static"), StaticCustomer(), concurrency=8,
                            server_url=test_dbs.server_url, snapshots={TAU_RETAIL: retail_snapshot})
    s = result.summary
    print(f"static oracle, static customer: pass^1 {s['pass_hat_k']['1']}, excluded {s['excluded']}")
    failed = [(t.task_id, t.excluded or t.ended_by, t.error) for t in result.trajectories if not t.success]
    _show(result.trajectories)
    assert failed == []
