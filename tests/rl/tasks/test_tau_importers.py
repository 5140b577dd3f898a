"""Importing tau-bench retail tasks: gold kept verbatim, scripts derived from it and the store."""

from __future__ import annotations

import json

import pytest

from rl.tasks.importers import ImportError_, import_tau1, import_tau2, split_conversational
from rl.tasks.tools_meta import WRITE_TOOLS


def test_tau1_test_split_keeps_gold_and_derives_one_goal_per_write(tau_data_dir, tau_retail):
    raw = json.loads((tau_data_dir / "tau1" / "retail" / "tasks_test.json").read_text())
    tasks = import_tau1(tau_data_dir, tau_retail, "test")
    assert len(tasks) == len(raw) == 115
    for t, r in zip(tasks, raw, strict=True):
        assert [(a.name, a.arguments) for a in t.gold_actions] == [(a["name"], a["kwargs"]) for a in r["actions"]]
        assert t.outputs == r["outputs"]
        assert t.customer.user_id == r["user_id"]
        writes = [a for a in r["actions"] if a["name"] in WRITE_TOOLS]
        acts = [g for g in t.script.goals if g.outcome == "act"]
        assert [g.action.name for g in acts] == [a["name"] for a in writes]
        assert t.instruction == r["instruction"]
    first = tasks[0]
    assert first.customer.identify_by == "name_zip" and first.customer.zip == "19122"
    exchange = first.script.goals[0]
    assert "Mechanical Keyboard" in exchange.details["items"] and "2478" in exchange.confirm_terms


def test_tau2_tasks_and_splits(tau_data_dir, tau_retail):
    tasks = import_tau2(tau_data_dir, tau_retail)
    assert len(tasks) == 114
    assert len(import_tau2(tau_data_dir, tau_retail, "train")) == 74
    assert all(t.customer.user_id in tau_retail["users"] for t in tasks)
    with pytest.raises(ImportError_):
        import_tau2(tau_data_dir, tau_retail, "nope")


def test_missing_benchmark_file_is_a_clear_error(tmp_path, tau_retail):
    with pytest.raises(ImportError_, match="not found"):
        import_tau1(tmp_path, tau_retail, "test")


def test_gold_plans_writing_to_another_customers_records_are_left_out_with_the_reason(tau_data_dir, tau_retail):
    kept, left_out = split_conversational(import_tau1(tau_data_dir, tau_retail, "test"), tau_retail)
    assert list(left_out) == ["tau1-retail-test-064"] and len(kept) == 114
    why = left_out["tau1-retail-test-064"]
    assert "#W7464385" in why and "james_sanchez_3954" in why and "harper_moore_6183" in why
    kept, left_out = split_conversational(import_tau2(tau_data_dir, tau_retail), tau_retail)
    assert left_out == {} and len(kept) == 114
    task = import_tau1(tau_data_dir, tau_retail, "test")[0]
    write = next(a for a in task.gold_actions if "order_id" in a.arguments and a.name != "get_order_details")
    write.arguments["order_id"] = "#W0000000"
    _, left_out = split_conversational([task], tau_retail)
    assert "does not have" in left_out[task.id]
