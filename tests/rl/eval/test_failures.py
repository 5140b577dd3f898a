"""Failure causes of evaluation episodes: wrong argument, failed / missing / extra write, missing
answer, a write without the customer's yes, running out of turns, and their counts in an evaluation
summary."""

from __future__ import annotations

from rl.env.episode import ToolCallRecord, Trajectory
from rl.eval.failures import count_failures, failure_causes
from rl.eval.summary import summarize, to_markdown
from rl.tasks.build import assemble
from rl.tasks.schema import Action, Customer, Goal

CUSTOMER = Customer(user_id="ann_lee_1", first_name="Ann", last_name="Lee", email="ann.lee@example.com",
                    zip="10001", identify_by="email")
CANCEL = Action(name="cancel_pending_order", arguments={"order_id": "#W100", "reason": "no longer needed"})


def cancel_task():
    goal = Goal(id="g0", kind="cancel", outcome="act", say="I'd like to cancel one of my orders.",
                details={"order_id": "It's order #W100.", "reason": "I no longer need it."}, action=CANCEL,
                order_id="#W100", confirm_terms=["#W100"])
    return assemble(task_id="t1", snapshot="tau-retail", customer=CUSTOMER, goals=[goal], split="test", tags=[])


def info_task():
    goal = Goal(id="g0", kind="info", outcome="info", say="What is the status of order #W100?",
                order_id="#W100", answer=["delivered"])
    return assemble(task_id="t2", snapshot="tau-retail", customer=CUSTOMER, goals=[goal], split="test", tags=[])


def episode(task, calls, reward=0.0, ended_by="user_stop", said="", excluded=None):
    return Trajectory(task_id=task.id, policy="p", policy_model="m", user="scripted", user_model="scripted",
                      user_prompt_version="scripted-2", reward=reward, ended_by=ended_by, excluded=excluded,
                      messages=[{"role": "assistant", "content": said}],
                      tool_calls=[ToolCallRecord(name=n, arguments=a, output="", ok=ok) for n, a, ok in calls])


def cancel(order="#W100", reason="no longer needed", ok=True):
    return ("cancel_pending_order", {"order_id": order, "reason": reason}, ok)


def test_success_and_excluded_episodes_have_no_cause():
    task = cancel_task()
    assert failure_causes(task, episode(task, [cancel()], reward=1.0)) == []
    assert failure_causes(task, episode(task, [], excluded="simulator_error")) == []


def test_wrong_argument_names_the_parameter():
    task = cancel_task()
    assert failure_causes(task, episode(task, [cancel(reason="ordered by mistake")])) == [
        "wrong_argument:cancel_pending_order.reason"]


def test_arguments_given_as_json_text_are_read():
    task = cancel_task()
    calls = [("cancel_pending_order", '{"order_id": "#W100", "reason": "ordered by mistake"}', True)]
    assert failure_causes(task, episode(task, calls)) == ["wrong_argument:cancel_pending_order.reason"]


def test_failed_missing_and_extra_writes():
    task = cancel_task()
    assert failure_causes(task, episode(task, [cancel(ok=False)])) == ["failed_write:cancel_pending_order"]
    assert failure_causes(task, episode(task, [], ended_by="max_turns")) == [
        "missing_write:cancel_pending_order", "ended_by:max_turns"]
    assert failure_causes(task, episode(task, [cancel(order="#W999")])) == [
        "missing_write:cancel_pending_order", "extra_write:cancel_pending_order"]


def test_a_right_write_without_the_customers_yes():
    task = cancel_task()
    traj = episode(task, [cancel()])
    traj.breakdown = {"state_match": True, "unconfirmed_writes": ['cancel_pending_order {"order_id": "#W100"}']}
    assert failure_causes(task, traj) == ["unconfirmed_write:cancel_pending_order"]


def test_missing_answer_and_unexplained_failures():
    task = info_task()
    assert failure_causes(task, episode(task, [], said="It is pending.")) == ["missing_output"]
    assert failure_causes(task, episode(task, [], said="It is delivered.", ended_by="max_turns")) == [
        "ended_by:max_turns", "other"]


def test_counts_in_the_summary_most_frequent_first():
    task, info = cancel_task(), info_task()
    trajs = [episode(task, [cancel(reason="ordered by mistake")]), episode(task, [cancel(reason="ordered by mistake")]),
             episode(task, [cancel()], reward=1.0), episode(info, [], said="pending")]
    assert count_failures([task, info], trajs) == {"wrong_argument:cancel_pending_order.reason": 2,
                                                    "missing_output": 1}
    summary = summarize([task, info], trajs, trials=1)
    assert summary["failure_causes"]["wrong_argument:cancel_pending_order.reason"] == 2
    assert "| wrong_argument:cancel_pending_order.reason | 2 |" in to_markdown(summary)
