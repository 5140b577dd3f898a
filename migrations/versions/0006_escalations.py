"""The escalation queue: conversations that ended with a transfer to a human, for ops to resolve
and for the cycle to mine into tasks.

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NOW = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "escalations",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("conversation_id", sa.String(64), sa.ForeignKey("conversations.id", ondelete="CASCADE"),
                  nullable=False, unique=True),
        sa.Column("customer_user_id", sa.String(128), nullable=True),
        sa.Column("state", sa.String(16), nullable=False, server_default="open"),
        sa.Column("summary", sa.Text, nullable=False, server_default=""),
        sa.Column("store_before", postgresql.JSONB, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_by", sa.String(128), nullable=True),
        sa.Column("note", sa.Text, nullable=False, server_default=""),
        sa.Column("mined_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("mined_by", sa.String(128), nullable=True),
        sa.CheckConstraint("state IN ('open', 'resolved', 'mined', 'dismissed')", name="ck_escalations_state"),
    )
    op.create_index("ix_escalations_state_created", "escalations", ["state", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_escalations_state_created", table_name="escalations")
    op.drop_table("escalations")
