"""Tasks mined from production: a conversation that ended with a transfer to a human becomes a
task once ops resolve its escalation (`backend/escalations.py`).

The customer's own messages give the goal (the LLM customer's instruction; the scripted
customer's goals are derived from the gold writes, as for imported tau tasks); the staff writes
ops made on that customer between the transfer and the resolution (the audit log) are the gold
actions. Ops made those writes on the live store, so a snapshot taken afterwards already shows
them: `MinedSet.store` is the snapshot's data with each mined customer's records put back as they
were when the conversation was transferred, which is the state the task starts from. One
escalation per customer is mined per call (the oldest), since two would need two starting
states of the same records; the others wait for the next cycle.

The cycle calls two functions: its snapshot step makes the template from
`await restored_store(store_url, cycle_id)` when that is not None, and its task-set
step calls `mined_tasks(store_url, data, cycle_id=...)`, which returns the tasks whose customer's
records the snapshot holds as they were at the transfer (none when the snapshot was not restored)
and marks their escalations `mined` by that cycle (a rerun of the step gets the same tasks).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend import escalations as q
from backend.escalations import mark_mined
from rl.tasks import goals as G
from rl.tasks.importers import ImportError_, task_from_gold
from rl.tasks.schema import Action, Task
from rl.tasks.tools_meta import WRITE_TOOLS

log = structlog.get_logger(__name__)

__all__ = ["MinedSet", "mine_escalations", "mark_mined", "mined_tasks", "restored_store",
           "instruction_from_messages"]


@dataclass
class MinedSet:
    tasks: list[Task]
    escalation_ids: list[int]
    store: dict[str, dict[str, Any]]  # the snapshot data with mined customers' records as they were
    skipped: dict[int, str] = field(default_factory=dict)  # escalation id -> why it gave no task
    before: dict[int, dict[str, Any]] = field(default_factory=dict)  # escalation id -> records at transfer


def instruction_from_messages(name: str, messages: list[str]) -> str:
    said = " ".join(f'"{m.strip()}"' for m in messages)
    return (f"You are {name}, a customer of the online store. You contacted customer service and wrote: {said} "
            "Your goal is what you asked for there; answer the agent's questions from what you wrote.")


def _restore(store: dict[str, dict[str, Any]], before: dict[str, Any]) -> None:
    for kind in ("users", "orders"):
        for key, record in (before.get(kind) or {}).items():
            store[kind][key] = copy.deepcopy(record)


async def mine_escalations(conn: AsyncConnection, data: dict[str, dict[str, Any]], *, snapshot: str,
                           limit: int = 200, cycle_id: str | None = None) -> MinedSet:
    """Tasks from resolved escalations (and those `cycle_id` already mined); read only."""
    rows = await conn.execute(text(
        "SELECT id FROM escalations WHERE state = 'resolved' OR (state = 'mined' AND mined_by = :c) "
        "ORDER BY id LIMIT :n"), {"n": limit, "c": cycle_id})
    store = {k: dict(v) for k, v in data.items()}
    tasks: list[Task] = []
    ids: list[int] = []
    skipped: dict[int, str] = {}
    before: dict[int, dict[str, Any]] = {}
    customers: set[str] = set()
    for (escalation_id,) in rows.all():
        esc = await q.get_escalation(conn, int(escalation_id))
        uid = esc.customer_user_id
        if uid is None or not esc.store_before or uid not in (esc.store_before.get("users") or {}):
            skipped[esc.id] = "the conversation never identified its customer"
            continue
        if uid in customers:
            skipped[esc.id] = "another escalation of this customer is mined first"
            continue
        gold = [Action(name=a.tool, arguments=a.arguments) for a in await q.staff_actions(conn, esc)]
        if not any(a.name in WRITE_TOOLS for a in gold):
            skipped[esc.id] = "ops made no staff write on this customer"
            continue
        messages = await q.customer_messages(conn, esc.conversation_id)
        if not messages:
            skipped[esc.id] = "the customer wrote nothing"
            continue
        candidate = {k: dict(v) for k, v in store.items()}
        _restore(candidate, esc.store_before)
        user = candidate["users"][uid]
        name = f"{user['name']['first_name']} {user['name']['last_name']}"
        try:
            task = task_from_gold(G.Store(candidate), task_id=f"mined-escalation-{esc.id}", uid=uid, actions=gold,
                                  outputs=[], instruction=instruction_from_messages(name, messages), split="mined",
                                  source=f"escalation:{esc.id}")
        except (ImportError_, KeyError) as e:
            skipped[esc.id] = f"cannot describe the staff actions as a task: {e}"
            continue
        store = candidate
        customers.add(uid)
        tasks.append(task.model_copy(update={"snapshot": snapshot, "tags": sorted({*task.tags, "mined"})}))
        ids.append(esc.id)
        before[esc.id] = esc.store_before
    return MinedSet(tasks=tasks, escalation_ids=ids, store=store, skipped=skipped, before=before)


def _same_records(data: dict[str, dict[str, Any]], before: dict[str, Any]) -> bool:
    return all(data[kind].get(key) == record for kind in ("users", "orders")
               for key, record in (before.get(kind) or {}).items())


async def _mine(store_url: str, data: dict[str, dict[str, Any]], snapshot: str, cycle_id: str | None) -> MinedSet:
    from backend.db.engine import make_engine

    engine = make_engine(store_url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return await mine_escalations(conn, data, snapshot=snapshot, cycle_id=cycle_id)
    finally:
        await engine.dispose()


async def restored_store(store_url: str, cycle_id: str | None = None) -> dict[str, dict[str, Any]] | None:
    """The live store's records (read in one read-only transaction) with the records of every
    customer about to be mined put back as they were at the transfer: the state the mined tasks
    start from. None when there is nothing to mine (a snapshot then copies the live store as is)."""
    from backend.db.engine import make_engine
    from backend.store.tau_data import export_store

    engine = make_engine(store_url, null_pool=True)
    try:
        async with engine.connect() as conn:
            pending = (await conn.execute(text(
                "SELECT 1 FROM escalations WHERE state = 'resolved' OR (state = 'mined' AND mined_by = :c) LIMIT 1"),
                {"c": cycle_id})).first()
        if pending is None:
            return None
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin() as tx:
                await conn.execute(text("SET TRANSACTION READ ONLY"))
                live = await export_store(conn)
                mined = await mine_escalations(conn, live, snapshot="live", cycle_id=cycle_id)
                await tx.rollback()
    finally:
        await engine.dispose()
    return mined.store if mined.escalation_ids else None


def mined_tasks(store_url: str, data: dict[str, dict[str, Any]], *, snapshot: str = "live",
                cycle_id: str | None = None) -> list[Task]:
    """The mined tasks that can start on `data` (the snapshot's records): those whose customer's
    records it holds as they were at the transfer. With `cycle_id`, their escalations are marked
    `mined` by it."""
    import asyncio

    mined = asyncio.run(_mine(store_url, data, snapshot, cycle_id))
    keep = [(t, i) for t, i in zip(mined.tasks, mined.escalation_ids, strict=True)
            if _same_records(data, mined.before[i])]
    if len(keep) < len(mined.tasks):
        log.warning("mined.snapshot_not_restored", skipped=len(mined.tasks) - len(keep),
                    hint="make the snapshot from restored_store(...)")
    if cycle_id is not None and keep:
        asyncio.run(_mark(store_url, [i for _, i in keep], cycle_id))
    return [t for t, _ in keep]


async def _mark(store_url: str, ids: list[int], cycle_id: str) -> None:
    from backend.db.engine import make_engine

    engine = make_engine(store_url, null_pool=True)
    try:
        async with engine.begin() as conn:
            await mark_mined(conn, ids, by=cycle_id)
    finally:
        await engine.dispose()
