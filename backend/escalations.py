"""The escalation queue: conversations that ended with a transfer to a human agent.

`enqueue` is called when a conversation is transferred: it records the conversation with the
transfer's summary and the customer's store records as they are at that moment. Ops then look
at the transcript, fix the customer's problem with staff tools (MCP or ops tooling; every write
is in the audit log) and `resolve` the escalation, or `dismiss` it. `staff_actions` are the
audited staff writes on that customer's records (their user id, or one of their orders) made
between the transfer and the resolution: the gold actions of the task the cycle mines from it
(`rl/tasks/mined.py`), which then marks it `mined`.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.store.records import fetch_orders, fetch_users, plain_numbers

TRANSFER_TOOL = "transfer_to_human_agents"
# state -> the states it may move to
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "open": ("resolved", "dismissed"),
    "resolved": ("mined", "dismissed"),
    "mined": (),
    "dismissed": (),
}


class EscalationNotFound(LookupError):
    pass


class InvalidTransition(ValueError):
    """The escalation is not in a state that allows this (the message says which)."""


@dataclass
class StaffAction:
    id: int
    created_at: dt.datetime
    actor: str
    tool: str
    arguments: dict[str, Any]


@dataclass
class EscalationRow:
    id: int
    conversation_id: str
    customer_user_id: str | None
    state: str
    summary: str
    created_at: dt.datetime
    updated_at: dt.datetime
    resolved_at: dt.datetime | None
    resolved_by: str | None
    note: str
    mined_at: dt.datetime | None
    mined_by: str | None
    store_before: dict[str, Any] | None = field(default=None, repr=False)


_COLUMNS = ("id, conversation_id, customer_user_id, state, summary, created_at, updated_at, resolved_at, "
            "resolved_by, note, mined_at, mined_by, store_before")


def _row(r: Any) -> EscalationRow:
    return EscalationRow(**dict(r._mapping))


async def _transfer_summary(conn: AsyncConnection, conversation_id: str) -> str:
    row = (await conn.execute(text(
        "SELECT arguments FROM conversation_tool_calls WHERE conversation_id = :c AND name = :n "
        "ORDER BY id DESC LIMIT 1"), {"c": conversation_id, "n": TRANSFER_TOOL})).first()
    if row is None:
        return ""
    try:
        args = json.loads(row[0])
    except ValueError:  # the model's arguments as written: keep them as they are
        return str(row[0])
    return str(args.get("summary", "")) if isinstance(args, dict) else str(args)


async def customer_records(conn: AsyncConnection, user_id: str) -> dict[str, Any]:
    """The customer's user record and orders, tau-shaped (JSON-safe numbers)."""
    users = await fetch_users(conn, [user_id])
    if user_id not in users:
        return {"users": {}, "orders": {}}
    orders = await fetch_orders(conn, users[user_id].get("orders", []))
    return plain_numbers({"users": users, "orders": orders})


async def enqueue(conn: AsyncConnection, conversation_id: str) -> int | None:
    """Put a transferred conversation in the queue (once); returns the escalation id (None when it
    was already queued). Runs in the caller's transaction."""
    conv = (await conn.execute(text("SELECT customer_user_id FROM conversations WHERE id = :c"),
                               {"c": conversation_id})).first()
    if conv is None:
        raise EscalationNotFound(f"there is no conversation {conversation_id!r}")
    user_id = conv[0]
    before = await customer_records(conn, user_id) if user_id else None
    row = (await conn.execute(text(
        "INSERT INTO escalations (conversation_id, customer_user_id, summary, store_before) "
        "VALUES (:c, :u, :s, CAST(:b AS jsonb)) ON CONFLICT (conversation_id) DO NOTHING RETURNING id"),
        {"c": conversation_id, "u": user_id, "s": await _transfer_summary(conn, conversation_id),
         "b": json.dumps(before) if before is not None else None})).first()
    return None if row is None else int(row[0])


async def list_escalations(conn: AsyncConnection, *, state: str | None = None, limit: int = 50,
                           before_id: int | None = None) -> list[EscalationRow]:
    """Newest first; `before_id` pages on."""
    where, params = ["TRUE"], {"limit": limit}
    if state is not None:
        where.append("state = :state")
        params["state"] = state
    if before_id is not None:
        where.append("id < :before")
        params["before"] = before_id
    rows = await conn.execute(text(f"SELECT {_COLUMNS} FROM escalations WHERE {' AND '.join(where)} "
                                   "ORDER BY id DESC LIMIT :limit"), params)
    return [_row(r) for r in rows]


async def get_escalation(conn: AsyncConnection, escalation_id: int, *, for_update: bool = False) -> EscalationRow:
    lock = " FOR UPDATE" if for_update else ""
    r = (await conn.execute(text(f"SELECT {_COLUMNS} FROM escalations WHERE id = :i{lock}"),
                            {"i": escalation_id})).first()
    if r is None:
        raise EscalationNotFound(f"there is no escalation {escalation_id}")
    return _row(r)


async def transcript(conn: AsyncConnection, conversation_id: str) -> list[dict[str, Any]]:
    """The conversation's messages in order (what the model saw, plus service notices)."""
    rows = await conn.execute(text(
        "SELECT seq, role, content, tool_calls, tool_call_id, name, model, notice, created_at "
        "FROM conversation_messages WHERE conversation_id = :c ORDER BY seq"), {"c": conversation_id})
    return [dict(r._mapping) for r in rows]


async def customer_messages(conn: AsyncConnection, conversation_id: str) -> list[str]:
    return [m["content"] for m in await transcript(conn, conversation_id)
            if m["role"] == "user" and not m["notice"] and m["content"].strip()]


async def staff_actions(conn: AsyncConnection, esc: EscalationRow) -> list[StaffAction]:
    """Audited staff writes on the escalation's customer (their user id or one of their orders),
    from the transfer until the resolution (until now while it is open)."""
    if esc.customer_user_id is None:
        return []
    rows = await conn.execute(text(
        "SELECT a.id, a.created_at, a.actor, a.tool, a.arguments FROM audit_log a "
        "WHERE a.event = 'staff_tool_call' AND a.created_at >= :since "
        "AND (CAST(:until AS timestamptz) IS NULL OR a.created_at <= :until) "
        "AND (a.arguments->>'user_id' = :u OR a.arguments->>'order_id' IN "
        "     (SELECT o.id FROM orders o WHERE o.customer_id = :u)) "
        "ORDER BY a.id"),
        {"since": esc.created_at, "until": esc.resolved_at, "u": esc.customer_user_id})
    return [StaffAction(**dict(r._mapping)) for r in rows]


async def _move(conn: AsyncConnection, escalation_id: int, to: str, sets: str, params: dict[str, Any]) -> EscalationRow:
    esc = await get_escalation(conn, escalation_id, for_update=True)
    if to not in TRANSITIONS[esc.state]:
        allowed = ", ".join(TRANSITIONS[esc.state]) or "nothing"
        raise InvalidTransition(f"escalation {escalation_id} is {esc.state}; it can move to {allowed}, not {to}")
    await conn.execute(text(f"UPDATE escalations SET state = :to, updated_at = now(){sets} WHERE id = :i"),
                       {"to": to, "i": escalation_id} | params)
    return await get_escalation(conn, escalation_id)


async def resolve(conn: AsyncConnection, escalation_id: int, *, actor: str, note: str = "") -> EscalationRow:
    """open -> resolved: ops have dealt with it; its staff writes become the mined task's gold."""
    return await _move(conn, escalation_id, "resolved",
                       ", resolved_at = now(), resolved_by = :actor, note = :note", {"actor": actor, "note": note})


async def dismiss(conn: AsyncConnection, escalation_id: int, *, actor: str, note: str = "") -> EscalationRow:
    """open or resolved -> dismissed: never becomes a task."""
    return await _move(conn, escalation_id, "dismissed", ", resolved_by = coalesce(resolved_by, :actor), "
                       "note = :note", {"actor": actor, "note": note})


async def mark_mined(conn: AsyncConnection, escalation_ids: list[int], *, by: str) -> list[int]:
    """resolved -> mined for those of `escalation_ids` still resolved; returns the ids it moved."""
    rows = await conn.execute(text(
        "UPDATE escalations SET state = 'mined', mined_at = now(), mined_by = :by, updated_at = now() "
        "WHERE id = ANY(:ids) AND state = 'resolved' RETURNING id"), {"ids": list(escalation_ids), "by": by})
    return sorted(int(r[0]) for r in rows)
