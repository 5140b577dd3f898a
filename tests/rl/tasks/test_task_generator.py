"""Task generation: determinism, coverage, split hygiene, the file format, and gold plans that run
through the real tools without errors (tau retail and synthetic stores)."""

from __future__ import annotations

import json

import pytest

from backend.db.testing import TestDatabases
from backend.store.seed import generate_store
from rl.env import Snapshot, create_snapshot, drop_snapshot
from rl.tasks.generator import SCHEDULE, generate_tasks
from rl.tasks.schema import Task, TaskFileError, load_tasks, save_tasks
from rl.tasks.verify import verify_gold


def test_same_seed_same_tasks_and_other_seed_other_tasks(tau_retail):
    a = generate_tasks(tau_retail, 40, seed=3, snapshot="tau-retail")
    b = generate_tasks(tau_retail, 40, seed=3, snapshot="tau-retail")
    c = generate_tasks(tau_retail, 40, seed=4, snapshot="tau-retail")
    dump = lambda ts: [t.model_dump_json() for t in ts]  # noqa: E731
    assert dump(a) == dump(b)
    assert dump(a) != dump(c)


def test_a_category_named_twice_takes_two_slots_of_the_cycle(tau_retail):
    def cats(ts):
        return [next(x for x in t.tags if x.startswith("category:"))[9:] for t in ts]

    plain = generate_tasks(tau_retail, 6, seed=1, snapshot="tau-retail", categories=["cancel", "info_status"])
    weighted = generate_tasks(tau_retail, 6, seed=1, snapshot="tau-retail",
                              categories=["info_status", "cancel", "info_status"])
    assert cats(plain) == ["cancel", "info_status"] * 3  # the schedule's order, whatever the list's
    assert cats(weighted) == ["cancel", "info_status", "info_status"] * 2
    assert plain[0].model_dump_json() == weighted[0].model_dump_json()  # slot 0 is drawn the same way


def test_unknown_categories_are_a_clear_error(tau_retail):
    with pytest.raises(ValueError, match="no such categories: \\['cancle'\\]"):
        generate_tasks(tau_retail, 2, seed=1, snapshot="tau-retail", categories=["cancel", "cancle"])
    with pytest.raises(ValueError, match="no such categories"):
        generate_tasks(tau_retail, 2, seed=1, snapshot="tau-retail", categories=[])


def test_every_category_and_variant_is_generated(generated_tasks):
    categories = {tag for t in generated_tasks for tag in t.tags if tag.startswith("category:")}
    assert categories == {f"category:{name}" for name, _ in SCHEDULE}
    tags = {tag for t in generated_tasks for tag in t.tags}
    for tag in ("goal_shift", "haggle", "multi_intent", "late_info", "identity", "refusal", "info"):
        assert tag in tags
    for kind in ("cancel", "modify_address", "modify_payment", "modify_items", "user_address", "return", "exchange"):
        assert f"kind:{kind}" in tags


def test_proposals_of_returns_and_swaps_must_name_their_items(generated_tasks, tau_retail):
    # a customer who asked to return the kettle says no to returning the dumbbells: the items'
    # product names are among the terms a proposal must mention (rl/simulator/scripted.py)
    goals = [g for t in generated_tasks for g in t.script.goals
             if g.outcome == "act" and g.kind in ("return", "exchange", "modify_items")]
    assert {g.kind for g in goals} == {"return", "exchange", "modify_items"}
    for g in goals:
        items = {i["item_id"]: i for i in tau_retail["orders"][g.order_id]["items"]}
        names = {items[i]["name"] for i in g.action.arguments["item_ids"]}
        assert names <= set(g.confirm_terms), (g.kind, names, g.confirm_terms)


def test_goal_shift_tasks_abandon_the_first_intent(generated_tasks):
    shifts = [t for t in generated_tasks if "goal_shift" in t.tags]
    assert shifts
    for t in shifts:
        first, final = t.script.goals[0], t.script.goals[-1]
        assert first.outcome == "abandon" and first.shift is not None
        assert first.action is not None and first.action not in t.gold_actions  # never a gold write
        assert final.action in t.gold_actions


def test_train_and_test_never_share_a_customer(tau_retail):
    tasks = generate_tasks(tau_retail, 300, seed=11, snapshot="tau-retail", test_fraction=0.3)
    train = {t.customer.user_id for t in tasks if t.split == "train"}
    test = {t.customer.user_id for t in tasks if t.split == "test"}
    assert train and test and not (train & test)


def test_task_file_round_trip_and_bad_files(tmp_path, generated_tasks):
    path = tmp_path / "tasks.json"
    save_tasks(path, generated_tasks[:5], meta={"seed": 7})
    assert [t.id for t in load_tasks(path)] == [t.id for t in generated_tasks[:5]]
    jsonl = tmp_path / "tasks.jsonl"
    jsonl.write_text("\n".join(t.model_dump_json() for t in generated_tasks[:3]))
    assert len(load_tasks(jsonl)) == 3
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tasks": [{"id": "x"}]}))
    with pytest.raises(TaskFileError):
        load_tasks(bad)
    with pytest.raises(TaskFileError):
        load_tasks(tmp_path / "missing.json")


async def test_generated_gold_plans_run_without_tool_errors(generated_tasks, retail_snapshot, test_dbs):
    problems = await verify_gold(generated_tasks, server_url=test_dbs.server_url,
                                 snapshots={"tau-retail": retail_snapshot})
    assert problems == []


async def test_synthetic_store_tasks_replay_cleanly(test_dbs: TestDatabases):
    data = generate_store(5, 80)
    tasks = generate_tasks(data, len(SCHEDULE), seed=1, snapshot="synthetic:5:80")
    assert all(isinstance(t, Task) and t.snapshot == "synthetic:5:80" for t in tasks)
    snap: Snapshot = await create_snapshot(test_dbs.server_url, data, name=f"{test_dbs.prefix}_syn")
    try:
        assert await verify_gold(tasks, server_url=test_dbs.server_url, snapshots={"synthetic:5:80": snap}) == []
    finally:
        await drop_snapshot(snap)


async def test_verify_reports_a_gold_write_that_fails(generated_tasks, retail_snapshot, test_dbs, tau_retail):
    task = next(t for t in generated_tasks if "category:cancel" in t.tags)
    delivered = next(oid for oid, o in tau_retail["orders"].items() if o["status"] == "delivered")
    bad = task.model_copy(update={"id": "broken", "gold_actions": [
        *task.gold_actions[:-1],
        task.gold_actions[-1].model_copy(update={"arguments": {"order_id": delivered, "reason": "no longer needed"}}),
    ]})
    problems = await verify_gold([task, bad], server_url=test_dbs.server_url, snapshots={"tau-retail": retail_snapshot})
    assert problems == [("broken", "cancel_pending_order failed: Error: non-pending order cannot be cancelled")]


def test_order_status_answers_cannot_be_guessed(generated_tasks, tau_retail):
    """An order-status question requires the order's tracking number too, so naming a likely
    status word without authenticating and looking the order up never earns the reward."""
    status_tasks = [t for t in generated_tasks if "category:info_status" in t.tags]
    assert status_tasks
    for task in status_tasks:
        order_ids = {a.arguments.get("order_id") for g in task.script.goals for a in g.lookups}
        tracking = {tr for oid in order_ids if oid in tau_retail["orders"]
                    for f in tau_retail["orders"][oid]["fulfillments"] for tr in f["tracking_id"]}
        assert any(out in tracking for out in task.outputs), task.id


@pytest.mark.parametrize(("category", "first_kind"), [("multi_cancel_cancel", "cancel"),
                                                     ("multi_info_cancel", "info")])
def test_a_second_request_names_another_order_of_the_same_customer(tau_retail, category, first_kind):
    tasks = generate_tasks(tau_retail, 4, seed=2, snapshot="tau-retail", categories=[category])
    for t in tasks:
        first, second = t.script.goals
        assert "goal_shift" not in t.tags and "multi_intent" in t.tags
        assert (first.kind, second.kind) == (first_kind, "cancel") and first.shift is None
        assert first.order_id != second.order_id
        for g in (first, second):
            assert tau_retail["orders"][g.order_id]["user_id"] == t.customer.user_id
        assert tau_retail["orders"][second.order_id]["status"] == "pending"
        writes = [a for a in t.gold_actions if a.name == "cancel_pending_order"]
        assert writes[-1].arguments["order_id"] == second.order_id
        assert len(writes) == (2 if first_kind == "cancel" else 1)
        assert second.say.startswith("One more thing: ")
