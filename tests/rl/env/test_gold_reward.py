"""Gold replay and reward: every tau1 retail task's gold actions score 1.0 against themselves;
perturbed action sequences score 0 and name the records that differ."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from rl.env import GoldSpec, GoldStateCache, SandboxPool, Snapshot, replay_actions, score


def _tasks(tau_data_dir: Path, split: str) -> list[dict[str, Any]]:
    return json.loads((tau_data_dir / "tau1" / "retail" / f"tasks_{split}.json").read_text())


async def _episode(pool: SandboxPool, cache: GoldStateCache, gold: GoldSpec, actions: list[dict],
                   messages: list[str], *, compat: bool = True):
    # rolled back afterwards: the pool reuses the sandbox only because it is then fresh again
    async with pool.sandbox() as sb, sb.rolled_back():
        await replay_actions(sb, actions, upstream_compat=compat, skip_terminal=False)
        changes = await sb.changed_records()
        return await score(sb, gold, messages, cache=cache, upstream_compat=compat), changes


@pytest.mark.parametrize(("split", "count"), [("train", 500), ("test", 115), ("dev", 20)])
def test_task_files_are_complete(tau_data_dir: Path, split: str, count: int) -> None:
    assert len(_tasks(tau_data_dir, split)) == count


@pytest.mark.parametrize(("split", "first", "stop"),
                         [("train", 0, 250), ("train", 250, 500), ("test", 0, 115), ("dev", 0, 20)])
async def test_gold_replay_of_every_task_scores_one(tau_snapshot: Snapshot, tau_data_dir: Path,
                                                    split: str, first: int, stop: int) -> None:
    """Every task's gold actions, replayed as the agent in one fresh sandbox, match the gold state
    replayed independently on another (two sandboxes per task, all through one pool)."""
    tasks = _tasks(tau_data_dir, split)[first:stop]
    assert len(tasks) == stop - first
    cache = GoldStateCache()
    sem = asyncio.Semaphore(6)
    async with SandboxPool(tau_snapshot, size=8, workers=3) as pool:

        async def one(i: int, task: dict):
            gold = GoldSpec.from_tau_task(f"{split}/{i}", task)
            async with sem:
                return await _episode(pool, cache, gold, gold.actions, list(gold.outputs))

        start = time.monotonic()
        results = await asyncio.gather(*(one(first + i, t) for i, t in enumerate(tasks)))
        elapsed = time.monotonic() - start
    failed = {first + i: r.explain() for i, (r, _) in enumerate(results) if r.reward != 1.0}
    assert failed == {}
    assert cache.replays == len(tasks)
    # the comparison is not vacuous: nearly every task changes the store
    changed = sum(1 for _, ch in results if any(ch.values()))
    assert changed >= 0.9 * len(tasks), changed
    print(f"{split}[{first}:{stop}]: {len(tasks)} tasks in {elapsed:.1f}s")


def _find(tasks: list[dict], name: str) -> tuple[int, dict, int]:
    for i, t in enumerate(tasks):
        for j, a in enumerate(t["actions"]):
            if a["name"] == name:
                return i, t, j
    raise AssertionError(f"no task with {name}")


async def test_a_different_item_scores_zero_and_names_the_order(tau_pool: SandboxPool, tau_snapshot: Snapshot,
                                                                tau_data_dir: Path) -> None:
    tasks = _tasks(tau_data_dir, "train")
    i, task, j = _find(tasks, "modify_pending_order_items")
    gold = GoldSpec.from_tau_task(f"train/{i}", task)
    action = gold.actions[j]["kwargs"]
    new_item = action["new_item_ids"][0]
    product = next(p for p in tau_snapshot.initial["products"].values() if new_item in p["variants"])
    other = next(v for v, var in product["variants"].items()
                 if var["available"] and v not in (new_item, *action["item_ids"]))
    perturbed = json.loads(json.dumps(gold.actions))
    perturbed[j]["kwargs"]["new_item_ids"][0] = other
    r, _ = await _episode(tau_pool, GoldStateCache(), gold, perturbed, list(gold.outputs))
    assert r.reward == 0.0 and not r.state_match
    oid = action["order_id"]
    assert oid in r.differing["orders"]
    got, expected = r.differing["orders"][oid]["got"], r.differing["orders"][oid]["expected"]
    assert other in [it["item_id"] for it in got["items"]]
    assert new_item in [it["item_id"] for it in expected["items"]]
    assert "orders " + oid in r.explain()


async def test_a_skipped_action_scores_zero(tau_pool: SandboxPool, tau_snapshot: Snapshot,
                                            tau_data_dir: Path) -> None:
    tasks = _tasks(tau_data_dir, "train")
    i, task, j = _find(tasks, "cancel_pending_order")
    gold = GoldSpec.from_tau_task(f"train/{i}", task)
    skipped = [a for k, a in enumerate(gold.actions) if k != j]
    r, _ = await _episode(tau_pool, GoldStateCache(), gold, skipped, [])
    oid = gold.actions[j]["kwargs"]["order_id"]
    assert r.reward == 0.0
    assert r.differing["orders"][oid]["got"] == tau_snapshot.initial["orders"][oid]
    assert r.differing["orders"][oid]["expected"]["status"] == "cancelled"
    assert r.unexpected == []  # a miss, not an unexpected change


async def test_an_extra_write_scores_zero(tau_pool: SandboxPool, tau_snapshot: Snapshot,
                                          tau_data_dir: Path) -> None:
    tasks = _tasks(tau_data_dir, "dev")
    i, task, _ = _find(tasks, "cancel_pending_order")
    gold = GoldSpec.from_tau_task(f"dev/{i}", task)
    uid = task["user_id"]
    extra = {"name": "modify_user_address", "kwargs": {
        "user_id": uid, "address1": "1 Extra Street", "address2": "", "city": "Austin",
        "state": "TX", "country": "USA", "zip": "73301"}}
    r, _ = await _episode(tau_pool, GoldStateCache(), gold, [*gold.actions, extra], [])
    assert r.reward == 0.0
    assert list(r.differing) == ["users"]
    assert r.differing["users"][uid]["got"]["address"]["address1"] == "1 Extra Street"
    assert r.differing["users"][uid]["expected"] == tau_snapshot.initial["users"][uid]
    assert r.unexpected == [f"users {uid}"]  # a record the gold leaves untouched (the safety gate reads it)


async def test_required_outputs_follow_the_tau1_rule(tau_pool: SandboxPool, tau_data_dir: Path) -> None:
    tasks = _tasks(tau_data_dir, "test")
    i, task = next((i, t) for i, t in enumerate(tasks) if t["outputs"])
    gold = GoldSpec.from_tau_task(f"test/{i}", task)
    cache = GoldStateCache()
    out = gold.outputs[0]
    said, _ = await _episode(tau_pool, cache, gold, gold.actions, [f"Sure! It comes to {out.upper()}."])
    silent, _ = await _episode(tau_pool, cache, gold, gold.actions, ["I cannot tell you that."])
    assert said.outputs[out] is True
    assert silent.reward == 0.0 and silent.state_match and silent.outputs[out] is False
    assert cache.replays == 1  # the gold state was replayed once and reused


async def test_failing_gold_actions_are_tolerated_and_terminal_tools_skipped(
        tau_pool: SandboxPool, tau_snapshot: Snapshot) -> None:
    delivered = next(o for o, v in tau_snapshot.initial["orders"].items() if v["status"] == "delivered")
    pending = next(o for o, v in tau_snapshot.initial["orders"].items() if v["status"] == "pending")
    cancel = {"name": "cancel_pending_order", "kwargs": {"order_id": pending, "reason": "ordered by mistake"}}
    gold = GoldSpec(key="custom/1", actions=[
        {"name": "cancel_pending_order", "kwargs": {"order_id": delivered, "reason": "no longer needed"}},
        cancel,
        {"name": "no_such_tool", "kwargs": {}},
        {"name": "transfer_to_human_agents", "kwargs": {"summary": "done"}},
    ])
    cache = GoldStateCache()
    r, changes = await _episode(tau_pool, cache, gold, [cancel], [], compat=False)
    assert r.reward == 1.0, r.explain()
    assert list(changes["orders"]) == [pending]
    # cached per compatibility flag: the compatible mode is a separate entry
    await _episode(tau_pool, cache, gold, [cancel], [], compat=True)
    assert len(cache) == 2 and cache.replays == 2


async def test_concurrent_scores_share_one_gold_replay(tau_pool: SandboxPool, tau_data_dir: Path) -> None:
    task = _tasks(tau_data_dir, "dev")[3]
    gold = GoldSpec.from_tau_task("dev/3", task)
    cache = GoldStateCache()
    results = await asyncio.gather(*(_episode(tau_pool, cache, gold, gold.actions, []) for _ in range(6)))
    assert [r.reward for r, _ in results] == [1.0] * 6
    assert cache.replays == 1
