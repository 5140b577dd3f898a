"""ORM models of the service side: customer conversations, their messages, the tool calls
the agent made in them, the audit log of refused or privileged tool calls, per-client request
quotas and the registered MCP clients.

Kept apart from the store tables (`backend.db.models`): a store export, a snapshot's
reward or a sandbox never looks at these. A conversation holds only a hash of its bearer
token, the customer it is bound to (set by the first successful identity tool, so the
binding survives a restart) and a turn lease that serializes concurrent messages across
processes. Messages are the exact chat history the model sees (OpenAI message shape),
numbered per conversation.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False)
    # "open" | "transferred" (a human agent took over)
    status: Mapped[str] = mapped_column(String(32), nullable=False, server_default="open")
    customer_user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    channel: Mapped[str] = mapped_column(String(32), nullable=False, server_default="api")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())
    # the turn lease: while set and in the future, one process is answering a message
    busy_until: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    busy_holder: Mapped[str | None] = mapped_column(String(64), nullable=True)


class Message(Base):
    __tablename__ = "conversation_messages"
    __table_args__ = (
        UniqueConstraint("conversation_id", "seq", name="uq_conversation_messages_seq"),
        Index("ix_conversation_messages_user_time", "conversation_id", "role", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
    )
    seq: Mapped[int] = mapped_column(Integer, nullable=False)
    # "user" | "assistant" | "tool"
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    content: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    # assistant messages: [{"id", "type": "function", "function": {"name", "arguments"}}]
    tool_calls: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB, nullable=True)
    tool_call_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    name: Mapped[str | None] = mapped_column(String(128), nullable=True)
    model: Mapped[str | None] = mapped_column(String(256), nullable=True)
    model_version: Mapped[str | None] = mapped_column(String(32), nullable=True)  # registry version id
    # a service notice to the customer (e.g. "please try again"): shown, never sent to the model
    notice: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default="false")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())


class ToolCall(Base):
    __tablename__ = "conversation_tool_calls"
    __table_args__ = (Index("ix_conversation_tool_calls_conversation", "conversation_id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False
    )
    message_seq: Mapped[int] = mapped_column(Integer, nullable=False)  # the assistant message asking for it
    call_id: Mapped[str] = mapped_column(String(128), nullable=False)
    name: Mapped[str] = mapped_column(String(256), nullable=False)
    arguments: Mapped[str] = mapped_column(Text, nullable=False)  # exactly as the model wrote them
    output: Mapped[str] = mapped_column(Text, nullable=False)
    # "ok" | "error" | "denied"
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)
    elapsed_ms: Mapped[float] = mapped_column(Float, nullable=False)
    model: Mapped[str | None] = mapped_column(String(256), nullable=True)
    model_version: Mapped[str | None] = mapped_column(String(32), nullable=True)  # registry version id
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())


class AuditEntry(Base):
    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_conversation", "conversation_id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())
    # "tool_denied" (a customer conversation was refused) | "staff_tool_call" (MCP / ops wrote)
    event: Mapped[str] = mapped_column(String(32), nullable=False)
    actor: Mapped[str] = mapped_column(String(64), nullable=False)  # "customer", "mcp", ...
    conversation_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    principal_user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    tool: Mapped[str] = mapped_column(String(256), nullable=False)
    arguments: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    reason: Mapped[str] = mapped_column(Text, nullable=False, server_default="")


class ClientQuota(Base):
    """How many requests of one kind a client made in one fixed window (see `backend.api.quotas`)."""

    __tablename__ = "client_quotas"

    client: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)  # "conversations" | "messages"
    window_start: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    used: Mapped[int] = mapped_column(Integer, nullable=False)


class McpClient(Base):
    """A client of `/mcp`: its name is its identity in the audit log (`mcp:<name>`); only the
    SHA-256 of its token is stored (`muarl mcp-clients add NAME` shows the token once)."""

    __tablename__ = "mcp_clients"

    name: Mapped[str] = mapped_column(String(48), primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
