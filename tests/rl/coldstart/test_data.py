"""Cold-start pipeline (a) on real sandboxes with the oracle and the scripted customer, and the filter."""

import copy
import json

from rl.coldstart.data import (
    collect_real_tool_trajectories,
    filter_records,
    mark_retracted_proposals,
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


def test_a_proposal_met_with_another_proposal_is_marked_out_of_the_loss():
    def said(role, content, **kw):
        return {"role": role, "content": content, **kw}

    call = {"id": "c1", "function": {"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}}}
    corrected = {"meta": {"reward": 1.0}, "messages": [
        said("user", "Cancel #W1."),
        said("assistant", "To confirm, I will cancel #W1 (no longer needed). Do you confirm (yes/no)?"),
        said("user", "No, I ordered it by mistake."),
        said("assistant", "To confirm, I will cancel #W1 (ordered by mistake). Do you confirm (yes/no)?"),
        said("user", "Yes."),
        said("assistant", "", tool_calls=[call]),
    ]}
    marked = mark_retracted_proposals(corrected)
    assert [m.get("train") for m in marked["messages"]] == [None, False, None, None, None, None]
    assert marked["meta"]["retracted_proposals"] == 1 and corrected["messages"][1].get("train") is None
    straight = {"meta": {}, "messages": corrected["messages"][2:]}
    assert mark_retracted_proposals(straight) is straight  # a yes then a write: nothing to mark
