"""Service tables: conversations, their messages and tool calls, and the audit log.

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NOW = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "conversations",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("status", sa.String(32), nullable=False, server_default="open"),
        sa.Column("customer_user_id", sa.String(128), nullable=True),
        sa.Column("channel", sa.String(32), nullable=False, server_default="api"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.Column("busy_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("busy_holder", sa.String(64), nullable=True),
    )
    op.create_table(
        "conversation_messages",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("conversation_id", sa.String(64), sa.ForeignKey("conversations.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False, server_default=""),
        sa.Column("tool_calls", postgresql.JSONB, nullable=True),
        sa.Column("tool_call_id", sa.String(128), nullable=True),
        sa.Column("name", sa.String(128), nullable=True),
        sa.Column("model", sa.String(256), nullable=True),
        sa.Column("notice", sa.Boolean, nullable=False, server_default=sa.text("false")),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.UniqueConstraint("conversation_id", "seq", name="uq_conversation_messages_seq"),
    )
    op.create_index("ix_conversation_messages_user_time", "conversation_messages",
                    ["conversation_id", "role", "created_at"])
    op.create_table(
        "conversation_tool_calls",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("conversation_id", sa.String(64), sa.ForeignKey("conversations.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("message_seq", sa.Integer, nullable=False),
        sa.Column("call_id", sa.String(128), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("arguments", sa.Text, nullable=False),
        sa.Column("output", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("elapsed_ms", sa.Float, nullable=False),
        sa.Column("model", sa.String(256), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
    )
    op.create_index("ix_conversation_tool_calls_conversation", "conversation_tool_calls", ["conversation_id"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("conversation_id", sa.String(64), nullable=True),
        sa.Column("principal_user_id", sa.String(128), nullable=True),
        sa.Column("tool", sa.String(256), nullable=False),
        sa.Column("arguments", postgresql.JSONB, nullable=False),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
    )
    op.create_index("ix_audit_log_conversation", "audit_log", ["conversation_id"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_conversation", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_conversation_tool_calls_conversation", table_name="conversation_tool_calls")
    op.drop_table("conversation_tool_calls")
    op.drop_index("ix_conversation_messages_user_time", table_name="conversation_messages")
    op.drop_table("conversation_messages")
    op.drop_table("conversations")
