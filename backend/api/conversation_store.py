"""Reading and writing conversations in Postgres (the service tables of
`backend.db.service_models`).

A conversation row holds the hash of its bearer token, the customer it is bound to and a
turn lease; its messages are numbered per conversation and kept in the OpenAI message
shape the model sees. The lease serializes concurrent messages to one conversation across
processes. A chat turn costs three statements here: `take_turn` (take the lease if no
other turn holds an unexpired one, check status and rate limit, store the message, read
the history), `record_tool_step` per tool call (inside the tool's own transaction, so a
store change and its transcript commit together) and `finish_turn` (store the reply, give
the lease back). The per-turn statements go straight to the asyncpg connection under the
SQLAlchemy one (`driver(conn)`), which costs a fraction of the CPU.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection


async def driver(conn: AsyncConnection) -> asyncpg.Connection:
    """The asyncpg connection under a SQLAlchemy one (its transaction, if started, applies)."""
    raw = await conn.get_raw_connection()
    return raw.driver_connection  # type: ignore[return-value]


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


def _jsonb(value: Any) -> str | None:
    return None if value is None else json.dumps(clean_json(value), default=str)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_matches(token: str, token_hash: str) -> bool:
    return hmac.compare_digest(hash_token(token), token_hash)


@dataclass
class ConversationRow:
    """A conversation as its token check sees it (status and customer: None when not read)."""

    id: str
    token_hash: str
    status: str | None
    customer_user_id: str | None


async def create_conversation(pg: asyncpg.Connection, channel: str = "api") -> tuple[str, str]:
    """A new conversation; returns its id and bearer token (only the token's hash is stored)."""
    conversation_id = uuid.uuid4().hex
    token = secrets.token_urlsafe(32)
    await pg.execute("INSERT INTO conversations (id, token_hash, channel) VALUES ($1, $2, $3)",
                     conversation_id, hash_token(token), channel)
    return conversation_id, token


async def get_conversation(pg: asyncpg.Connection, conversation_id: str) -> ConversationRow | None:
    row = await pg.fetchrow("SELECT id, token_hash, status, customer_user_id FROM conversations WHERE id = $1",
                            conversation_id)
    return ConversationRow(*row) if row else None


async def release_lease(pg: asyncpg.Connection, conversation_id: str, holder: str,
                        status: str | None = None) -> None:
    await pg.execute(
        "UPDATE conversations SET busy_until = NULL, busy_holder = NULL, updated_at = now(), "
        "status = coalesce($3, status) WHERE id = $1 AND busy_holder = $2",
        conversation_id, holder, status)


@dataclass
class TurnStart:
    """What `take_turn` found: the lease's view of the conversation and, when the message was
    stored, its number and the history before it."""

    status: str
    customer_user_id: str | None
    recent_user_messages: int
    seq: int | None  # None: refused (transferred or rate limited); the lease must be released
    history: list[dict[str, Any]]


_TAKE_TURN = """
WITH lease AS (
  UPDATE conversations AS c
     SET busy_until = now() + make_interval(secs => $3), busy_holder = $2
   WHERE c.id = $1 AND (c.busy_until IS NULL OR c.busy_until < now())
  RETURNING c.status, c.customer_user_id,
    (SELECT count(*) FROM conversation_messages m
      WHERE m.conversation_id = c.id AND m.role = 'user'
        AND m.created_at > now() - make_interval(secs => $4)) AS recent
), stored AS (
  INSERT INTO conversation_messages (conversation_id, seq, role, content)
  SELECT $1, coalesce((SELECT max(seq) FROM conversation_messages WHERE conversation_id = $1), 0) + 1, 'user', $6
    FROM lease WHERE lease.status <> 'transferred' AND lease.recent < $5
  RETURNING seq
)
SELECT lease.status, lease.customer_user_id, lease.recent, (SELECT seq FROM stored) AS seq,
       CASE WHEN EXISTS (SELECT 1 FROM stored) THEN
         (SELECT json_agg(json_build_object('seq', m.seq, 'role', m.role, 'content', m.content,
                                            'tool_calls', m.tool_calls, 'tool_call_id', m.tool_call_id,
                                            'notice', m.notice) ORDER BY m.seq)
            FROM conversation_messages m WHERE m.conversation_id = $1)
       END AS history
  FROM lease
"""


async def take_turn(pg: asyncpg.Connection, conversation_id: str, holder: str, lease_s: float, limit: int,
                    content: str, window_s: float = 60.0) -> TurnStart | None:
    """In one statement: take the turn lease, check the rate limit and the status, store the
    customer's message and read the history before it. None when another turn holds the lease."""
    row = await pg.fetchrow(_TAKE_TURN, conversation_id, holder, float(lease_s), float(window_s), int(limit),
                            clean_text(content))
    if row is None:
        return None
    history = row[4] or []
    if isinstance(history, str):  # a connection without SQLAlchemy's json codec
        history = json.loads(history)
    return TurnStart(row[0], row[1], int(row[2]), row[3], history)


_FINISH_TURN = """
WITH reply AS (
  INSERT INTO conversation_messages (conversation_id, seq, role, content, model, notice, model_version)
  VALUES ($1, $3, 'assistant', $4, $5, $6, $8)
)
UPDATE conversations SET busy_until = NULL, busy_holder = NULL, updated_at = now(),
       status = coalesce($7, status)
 WHERE id = $1 AND busy_holder = $2
"""


async def finish_turn(pg: asyncpg.Connection, conversation_id: str, holder: str, seq: int, content: str,
                      model: str | None, notice: bool, status: str | None = None, *,
                      model_version: str | None = None) -> None:
    """In one statement: store the reply (and the registry version that wrote it) and give the
    turn lease back."""
    await pg.execute(_FINISH_TURN, conversation_id, holder, seq, clean_text(content), model and model[:256],
                     notice, status, model_version)


@dataclass
class ToolStepRecord:
    """Everything one tool call adds to the transcript (written by `record_tool_step`)."""

    conversation_id: str
    seq: int  # the tool message
    call_id: str
    name: str
    arguments: str
    output: str
    outcome: str
    elapsed_ms: float
    model: str | None
    assistant_seq: int
    model_version: str | None = None  # the registry version that asked for the call
    assistant: dict[str, Any] | None = None  # the assistant message asking for it, when not stored yet
    bind_user_id: str | None = None  # the customer this call authenticated
    denied: list[dict[str, Any]] | None = None  # audit rows: {"tool", "arguments", "reason", "principal_user_id"}


async def record_tool_step(conn: AsyncConnection, step: ToolStepRecord) -> None:
    """One statement that stores a tool call's messages, its record, the customer binding and the
    audit rows of refusals, inside the caller's (SQLAlchemy) transaction with the tool's changes."""
    parts = [
        "t AS (INSERT INTO conversation_messages (conversation_id, seq, role, content, tool_call_id, name) "
        "VALUES (:cid, :seq, 'tool', :output, :call_id, :short_name))",
        "c AS (INSERT INTO conversation_tool_calls (conversation_id, message_seq, call_id, name, arguments, "
        "output, outcome, elapsed_ms, model, model_version) VALUES (:cid, :aseq, :call_id, :name, :arguments, "
        ":output, :outcome, :elapsed_ms, :model, :model_version))",
    ]
    params: dict[str, Any] = {
        "cid": step.conversation_id, "seq": step.seq, "aseq": step.assistant_seq,
        "call_id": clean_text(step.call_id)[:128], "name": clean_text(step.name)[:256],
        "short_name": clean_text(step.name)[:128], "arguments": clean_text(step.arguments),
        "output": clean_text(step.output), "outcome": step.outcome, "elapsed_ms": float(step.elapsed_ms),
        "model": step.model and step.model[:256], "model_version": step.model_version,
    }
    if step.assistant is not None:
        parts.append("a AS (INSERT INTO conversation_messages (conversation_id, seq, role, content, tool_calls, "
                     "model, model_version) VALUES (:cid, :aseq, 'assistant', :acontent, "
                     "CAST(:atool_calls AS jsonb), :model, :model_version))")
        params["acontent"] = clean_text(step.assistant.get("content") or "")
        params["atool_calls"] = _jsonb(step.assistant.get("tool_calls"))
    if step.bind_user_id is not None:
        parts.append("b AS (UPDATE conversations SET customer_user_id = :uid WHERE id = :cid)")
        params["uid"] = step.bind_user_id
    for i, refused in enumerate(step.denied or []):
        parts.append(f"d{i} AS (INSERT INTO audit_log (event, actor, tool, arguments, reason, conversation_id, "
                     f"principal_user_id) VALUES ('tool_denied', 'customer', :dtool{i}, "
                     f"CAST(:dargs{i} AS jsonb), :dreason{i}, :cid, :duser{i}))")
        params[f"dtool{i}"] = clean_text(refused["tool"])[:256]
        params[f"dargs{i}"] = _jsonb(refused["arguments"])
        params[f"dreason{i}"] = clean_text(refused["reason"])
        params[f"duser{i}"] = refused["principal_user_id"]
    await conn.execute(text("WITH " + ",\n".join(parts) + "\nSELECT 1"), params)


_MESSAGES = """
SELECT seq, role, content, tool_calls, tool_call_id, name, model, model_version, notice, created_at
  FROM conversation_messages WHERE conversation_id = $1 ORDER BY seq
"""


async def load_messages(pg: asyncpg.Connection, conversation_id: str) -> list[dict[str, Any]]:
    """Every stored message of the conversation, oldest first."""
    return [dict(r) for r in await pg.fetch(_MESSAGES, conversation_id)]


def as_model_message(row: dict[str, Any]) -> dict[str, Any]:
    """A stored message in the OpenAI chat shape."""
    role = row["role"]
    if role == "tool":
        return {"role": "tool", "tool_call_id": row["tool_call_id"] or "", "content": row["content"]}
    message: dict[str, Any] = {"role": role, "content": row["content"]}
    if role == "assistant" and row.get("tool_calls"):
        message["tool_calls"] = row["tool_calls"]
    return message
