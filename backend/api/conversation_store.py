"""Reading and writing conversations in Postgres (SQLAlchemy Core on the service tables).

A conversation row holds the hash of its bearer token, the customer it is bound to and a
turn lease; its messages are numbered per conversation and kept in the OpenAI message
shape the model sees. The lease is how concurrent messages to one conversation are
serialized across processes: `acquire_lease` is one atomic UPDATE that only succeeds when
no other turn holds an unexpired lease, and it also counts the customer's recent messages
for the rate limit, so a turn starts with a single round trip.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.service_models import AuditEntry, Conversation, Message, ToolCall

conversations = Conversation.__table__
messages = Message.__table__
tool_calls = ToolCall.__table__
audit_log = AuditEntry.__table__


def clean_text(value: str) -> str:
    """Text Postgres can store: NUL characters and lone surrogates replaced."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", "replace").decode("utf-8")
    return value


def clean_json(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_json(v) for k, v in value.items()}
    return value


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_matches(token: str, token_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), token_hash)


@dataclass
class ConversationRow:
    id: str
    token_hash: str
    status: str
    customer_user_id: str | None


@dataclass
class Lease:
    status: str
    customer_user_id: str | None
    recent_user_messages: int


async def create_conversation(conn: AsyncConnection, channel: str = "api") -> tuple[str, str]:
    """A new conversation; returns its id and bearer token (only the token's hash is stored)."""
    conversation_id = uuid.uuid4().hex
    token = secrets.token_urlsafe(32)
    await conn.execute(insert(conversations).values(id=conversation_id, token_hash=hash_token(token),
                                                    channel=channel))
    return conversation_id, token


_GET = select(conversations.c.id, conversations.c.token_hash, conversations.c.status,
              conversations.c.customer_user_id).where(conversations.c.id == bindparam("id"))


async def get_conversation(conn: AsyncConnection, conversation_id: str) -> ConversationRow | None:
    row = (await conn.execute(_GET, {"id": conversation_id})).first()
    return ConversationRow(*row) if row else None


_ACQUIRE = text("""
UPDATE conversations AS c
   SET busy_until = now() + make_interval(secs => :lease_s), busy_holder = :holder
 WHERE c.id = :id AND (c.busy_until IS NULL OR c.busy_until < now())
RETURNING c.status, c.customer_user_id,
  (SELECT count(*) FROM conversation_messages m
    WHERE m.conversation_id = c.id AND m.role = 'user'
      AND m.created_at > now() - make_interval(secs => :window_s)) AS recent
""")


async def acquire_lease(conn: AsyncConnection, conversation_id: str, holder: str, lease_s: float,
                        window_s: float = 60.0) -> Lease | None:
    """Take the turn lease (None when another turn holds it) and count recent customer messages."""
    row = (await conn.execute(_ACQUIRE, {"id": conversation_id, "holder": holder, "lease_s": float(lease_s),
                                         "window_s": float(window_s)})).first()
    return Lease(row[0], row[1], int(row[2])) if row else None


async def release_lease(conn: AsyncConnection, conversation_id: str, holder: str,
                        status: str | None = None) -> None:
    values: dict[str, Any] = {"busy_until": None, "busy_holder": None, "updated_at": text("now()")}
    if status:
        values["status"] = status
    await conn.execute(update(conversations)
                       .where(conversations.c.id == conversation_id, conversations.c.busy_holder == holder)
                       .values(**values))


async def bind_customer(conn: AsyncConnection, conversation_id: str, user_id: str) -> None:
    await conn.execute(update(conversations).where(conversations.c.id == conversation_id)
                       .values(customer_user_id=user_id))


_MESSAGES = (select(messages.c.seq, messages.c.role, messages.c.content, messages.c.tool_calls,
                    messages.c.tool_call_id, messages.c.name, messages.c.model, messages.c.notice,
                    messages.c.created_at)
             .where(messages.c.conversation_id == bindparam("id")).order_by(messages.c.seq))


async def load_messages(conn: AsyncConnection, conversation_id: str) -> list[dict[str, Any]]:
    """Every stored message of the conversation, oldest first."""
    rows = (await conn.execute(_MESSAGES, {"id": conversation_id})).mappings().all()
    return [dict(r) for r in rows]


def as_model_message(row: dict[str, Any]) -> dict[str, Any]:
    """A stored message in the OpenAI chat shape."""
    role = row["role"]
    if role == "tool":
        return {"role": "tool", "tool_call_id": row["tool_call_id"] or "", "content": row["content"]}
    message: dict[str, Any] = {"role": role, "content": row["content"]}
    if role == "assistant" and row.get("tool_calls"):
        message["tool_calls"] = row["tool_calls"]
    return message


_INSERT_MESSAGE = insert(messages)


async def append_message(conn: AsyncConnection, conversation_id: str, seq: int, role: str, content: str, *,
                         tool_calls: list[dict[str, Any]] | None = None, tool_call_id: str | None = None,
                         name: str | None = None, model: str | None = None, notice: bool = False) -> None:
    await conn.execute(_INSERT_MESSAGE, {
        "conversation_id": conversation_id, "seq": seq, "role": role, "content": clean_text(content),
        "tool_calls": clean_json(tool_calls), "tool_call_id": tool_call_id and clean_text(tool_call_id)[:128],
        "name": name and clean_text(name)[:128], "model": model,
        "notice": notice,
    })


async def record_tool_call(conn: AsyncConnection, conversation_id: str, message_seq: int, call_id: str,
                           name: str, arguments: str, output: str, outcome: str, elapsed_ms: float,
                           model: str | None) -> None:
    await conn.execute(insert(tool_calls), {
        "conversation_id": conversation_id, "message_seq": message_seq, "call_id": clean_text(call_id)[:128],
        "name": clean_text(name)[:256], "arguments": clean_text(arguments), "output": clean_text(output),
        "outcome": outcome, "elapsed_ms": elapsed_ms, "model": model,
    })


async def write_audit(conn: AsyncConnection, *, event: str, actor: str, tool: str, arguments: dict[str, Any],
                      reason: str, conversation_id: str | None = None,
                      principal_user_id: str | None = None) -> None:
    await conn.execute(insert(audit_log), {
        "event": event, "actor": actor, "tool": tool, "reason": reason, "conversation_id": conversation_id,
        "principal_user_id": principal_user_id,
        "arguments": clean_json(json.loads(json.dumps(arguments, default=str))),
    })
