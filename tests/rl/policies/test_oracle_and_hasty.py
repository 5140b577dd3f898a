"""The oracle passes generated tasks of every category with scripted customers; the hasty baseline
(acts on the first stated intent, never asks for confirmation) fails the goal-shift and haggling
tasks - the tasks test what they claim to test - and, where it does reach the gold state, fails the
policy's rule that a change needs the customer's yes."""

from __future__ import annotations

import pytest

from rl.eval.harness import evaluate
from rl.policies.base import make_policy
from rl.simulator.scripted import ScriptedCustomer


async def test_oracle_passes_every_category_and_hasty_fails_goal_shifts(generated_tasks, retail_snapshot, test_dbs):
    generated_tasks = generated_tasks[: len(generated_tasks) // 2]  # one task per category
    snaps = {"tau-retail": retail_snapshot}
    oracle = await evaluate(generated_tasks, make_policy("oracle"), ScriptedCustomer(), concurrency=4,
                            server_url=test_dbs.server_url, snapshots=snaps)
    failed = [(t.task_id, t.excluded, t.breakdown and t.breakdown["differing"]) for t in oracle.trajectories
              if not t.success]
    assert failed == []
    assert oracle.summary["pass_hat_k"]["1"] == 1.0 and oracle.summary["excluded"] == {}
    assert oracle.summary["tcr"] == 1.0
    assert all(t.breakdown["unconfirmed_writes"] == [] for t in oracle.trajectories)
    hasty = await evaluate(generated_tasks, make_policy("hasty"), ScriptedCustomer(), concurrency=4,
                           server_url=test_dbs.server_url, snapshots=snaps)
    by_tag = hasty.summary["by_tag"]
    assert by_tag["goal_shift"]["pass_hat_k"]["1"] == 0.0
    assert by_tag["haggle"]["pass_hat_k"]["1"] == 0.0
    assert by_tag["kind:cancel"]["n"] > 0
    plain = [t for t in hasty.trajectories if any(tag in t.tags for tag in ("category:cancel", "category:return"))]
    # plain requests: acting without asking reaches the gold state, and is still a miss
    assert plain and all(t.breakdown["state_match"] and not t.success for t in plain)
    assert all(w.startswith(("cancel_pending_order ", "return_delivered_order_items "))
               for t in plain for w in t.breakdown["unconfirmed_writes"])
    assert all(t.breakdown["unconfirmed_writes"] for t in plain)
    assert hasty.summary["pass_hat_k"]["1"] < oracle.summary["pass_hat_k"]["1"] - 0.2


def test_unknown_policy_specs_are_clear_errors():
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("bogus")
    with pytest.raises(ValueError, match="needs a model"):
        make_policy("openai:")
