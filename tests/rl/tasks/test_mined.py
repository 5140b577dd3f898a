"""Mining resolved escalations into tasks on a real store: the customer's messages give the
instruction, the staff write ops made on that customer is the gold action (another customer's
is not), and the gold replays on a snapshot of the mined store (the customer's records put back
as they were at the transfer) although the live store already has the write; open, unidentified
and write-less escalations give no task; the cycle's calls (`restored_store` for its
snapshot, `mined_tasks` for its task set) agree, mark the escalation mined by that cycle, and
give nothing on a snapshot that was not restored."""

from __future__ import annotations

import asyncio
import json
import uuid

from sqlalchemy import text

from backend import escalations as q
from backend.db.engine import make_engine
from backend.store.tau_data import export_store
from backend.tools.context import Principal, ToolContext
from backend.tools.registry import RETAIL
from rl.env.gold import GoldSpec, replay_gold
from rl.env.sandbox import temporary_sandbox
from rl.env.snapshot import create_snapshot, drop_snapshot
from rl.tasks.mined import mark_mined, mine_escalations, mined_tasks, restored_store
from tests.backend.api.serving import customer_with


async def _conversation(conn, user_id: str | None, messages: list[str]) -> str:
    cid = uuid.uuid4().hex
    await conn.execute(text("INSERT INTO conversations (id, token_hash, status, customer_user_id) "
                            "VALUES (:i, 'x', 'transferred', :u)"), {"i": cid, "u": user_id})
    for seq, m in enumerate(messages):
        await conn.execute(text("INSERT INTO conversation_messages (conversation_id, seq, role, content) "
                                "VALUES (:c, :s, 'user', :m)"), {"c": cid, "s": 2 * seq, "m": m})
        await conn.execute(text("INSERT INTO conversation_messages (conversation_id, seq, role, content) "
                                "VALUES (:c, :s, 'assistant', 'One moment.')"), {"c": cid, "s": 2 * seq + 1})
    return cid


async def _staff_write(conn, tool: str, arguments: dict) -> None:
    """What the MCP server does for a staff write: the tool call and its audit row."""
    import backend.tools.retail  # noqa: F401

    result = await RETAIL.call(ToolContext(conn, principal=Principal.staff("mcp")), tool, arguments)
    assert result.ok, result.output
    await conn.execute(text("INSERT INTO audit_log (event, actor, tool, arguments) "
                            "VALUES ('staff_tool_call', 'mcp', :t, CAST(:a AS jsonb))"),
                       {"t": tool, "a": json.dumps(arguments)})


async def test_resolved_escalations_become_replayable_tasks(tau_db: str, tau_retail, test_dbs) -> None:
    user, order_id = customer_with(tau_retail, "pending")
    other, other_order = customer_with(tau_retail, "pending", skip=1)
    third, _ = customer_with(tau_retail, "pending", skip=2)
    said = [f"Hi, I'm {user['email']}.", f"Cancel {order_id} please, I ordered it by mistake."]
    engine = make_engine(tau_db, null_pool=True)
    try:
        async with engine.begin() as conn:
            mined_one = await q.enqueue(conn, await _conversation(conn, user["user_id"], said))
            anonymous = await q.enqueue(conn, await _conversation(conn, None, ["help"]))
            no_write = await q.enqueue(conn, await _conversation(conn, third["user_id"], ["where is my order?"]))
            still_open = await q.enqueue(conn, await _conversation(conn, other["user_id"], ["cancel it"]))
        async with engine.begin() as conn:
            await _staff_write(conn, "cancel_pending_order", {"order_id": order_id, "reason": "ordered by mistake"})
            await _staff_write(conn, "cancel_pending_order", {"order_id": other_order, "reason": "no longer needed"})
            for esc_id in (mined_one, anonymous, no_write):
                await q.resolve(conn, esc_id, actor="ops")
        async with engine.connect() as conn:
            live = await export_store(conn)
            assert live["orders"][order_id]["status"] == "cancelled"
            mined = await mine_escalations(conn, live, snapshot="live-test")
    finally:
        await engine.dispose()

    assert mined.escalation_ids == [mined_one]
    assert set(mined.skipped) == {anonymous, no_write} and still_open not in mined.skipped
    [task] = mined.tasks
    assert task.customer.user_id == user["user_id"] and task.snapshot == "live-test" and "mined" in task.tags
    assert [(a.name, a.arguments) for a in task.gold_actions] == [
        ("cancel_pending_order", {"order_id": order_id, "reason": "ordered by mistake"})]
    assert all(m in task.instruction for m in said)
    assert task.script.goals[0].kind == "cancel" and task.script.goals[0].order_id == order_id
    assert mined.store["orders"][order_id]["status"] == "pending"  # as it was at the transfer
    assert mined.store["orders"][other_order]["status"] == "cancelled"  # not mined: left as live

    snap = await create_snapshot(test_dbs.server_url, mined.store, name=f"{test_dbs.prefix}_mined")
    try:
        async with temporary_sandbox(snap) as sandbox:
            changes = await replay_gold(sandbox, GoldSpec(task.id, [a.model_dump() for a in task.gold_actions]),
                                        upstream_compat=False)
        assert changes["orders"][order_id]["status"] == "cancelled"
    finally:
        await drop_snapshot(snap)

    # the cycle's calls: a snapshot that was not restored gets no mined task (its gold would not apply)
    assert await asyncio.to_thread(mined_tasks, tau_db, live, cycle_id="c1") == []
    restored = await restored_store(tau_db, "c1")
    assert restored is not None and restored["orders"][order_id]["status"] == "pending"
    assert restored["orders"][other_order]["status"] == "cancelled"  # its escalation is still open
    [again] = await asyncio.to_thread(mined_tasks, tau_db, restored, cycle_id="c1")
    assert again.id == task.id
    # marked mined by that cycle; its rerun still gets the task, another cycle does not
    assert [t.id for t in await asyncio.to_thread(mined_tasks, tau_db, restored, cycle_id="c1")] == [task.id]
    assert await asyncio.to_thread(mined_tasks, tau_db, restored, cycle_id="c2") == []

    engine = make_engine(tau_db, null_pool=True)
    try:
        async with engine.begin() as conn:
            esc = await q.get_escalation(conn, mined_one)
            assert esc.state == "mined" and esc.mined_by == "c1"
            assert await mark_mined(conn, [mined_one, still_open], by="cycle-1") == []
            assert (await q.get_escalation(conn, still_open)).state == "open"
    finally:
        await engine.dispose()
