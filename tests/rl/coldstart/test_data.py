"""Cold-start pipeline (a) on real sandboxes with the oracle and the scripted customer, and the filter."""

import copy
import json

from rl.coldstart.data import (
    collect_real_tool_trajectories,
    filter_records,
    quality_problems,
    write_jsonl,
    write_tool_names,
)
from rl.coldstart.sft import read_records
from rl.env import SandboxPool, create_snapshot, drop_snapshot
from rl.env.gold import GoldStateCache
from rl.policies.oracle import OraclePolicy
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks


async def test_oracle_trajectories_pass_the_filter_and_hasty_ones_do_not(test_dbs, tau_retail, tmp_path):
    tasks = generate_tasks(tau_retail, 12, 3, snapshot="tau-retail")
    snap = await create_snapshot(test_dbs.server_url, tau_retail, name=f"{test_dbs.prefix}_cold_snap")
    try:
        async with SandboxPool(snap, size=4) as pool:
            cache = GoldStateCache()
            good = await collect_real_tool_trajectories(tasks, OraclePolicy(), ScriptedCustomer(), pool, cache)
            hasty = await collect_real_tool_trajectories(tasks, OraclePolicy(hasty=True), ScriptedCustomer(), pool,
                                                         cache)
    finally:
        await drop_snapshot(snap)
    writes = write_tool_names()
    kept, why = filter_records(good, writes)
    assert len(kept) >= 11, why  # the oracle is (nearly) always right and asks before writing
    hasty_kept, hasty_why = filter_records(hasty, writes)
    assert len(hasty_kept) < len(kept) and any("without confirmation" in k for k in hasty_why), hasty_why
    path = write_jsonl(kept, tmp_path / "cold.jsonl")
    back = read_records(path)
    assert back == json.loads(json.dumps(kept)) and back[0]["tools"][0]["type"] == "function"
    assert back[0]["messages"][0]["role"] == "system"


def test_filter_rejects_bad_records():
    writes = {"cancel_pending_order"}
    base = {"tools": [{"type": "function", "function": {"name": "cancel_pending_order"}}],
            "meta": {"reward": 1.0, "excluded": None},
            "messages": [{"role": "user", "content": "cancel #W1"},
                         {"role": "assistant", "content": "Cancel #W1 because no longer needed. Confirm?"},
                         {"role": "user", "content": "Yes, please."},
                         {"role": "assistant", "content": None, "tool_calls": [{"function": {
                             "name": "cancel_pending_order",
                             "arguments": '{"order_id": "#W1", "reason": "no longer needed"}'}}]}]}
    assert quality_problems(base, writes) == []
    no_confirm = copy.deepcopy(base)
    no_confirm["messages"][2]["content"] = "Hmm, wait."
    assert quality_problems(no_confirm, writes) == ["cancel_pending_order without confirmation"]
    failed = copy.deepcopy(base) | {"meta": {"reward": 0.0}}
    assert "reward is not 1" in quality_problems(failed, writes)
    bad_json = copy.deepcopy(base)
    bad_json["messages"][3]["tool_calls"][0]["function"]["arguments"] = "{oops"
    assert "arguments of cancel_pending_order are not JSON" in quality_problems(bad_json, writes)
