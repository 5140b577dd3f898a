"""The online cycle's state: one row per cycle, at most one active (partial unique index).

Revision ID: 0005
Revises: 0004 (the coordinator relinks the chain)
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NOW = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "cycles",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False, server_default="queued"),
        sa.Column("trigger", sa.String(32), nullable=False, server_default="manual"),
        sa.Column("recipe", sa.String(64), nullable=False),
        sa.Column("overrides", postgresql.JSONB, nullable=False, server_default="[]"),
        sa.Column("step", sa.String(16), nullable=False, server_default="snapshot"),
        sa.Column("progress", sa.Float, nullable=False, server_default="0"),
        sa.Column("eta_s", sa.Float, nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
        sa.Column("snapshot", sa.String(63), nullable=True),
        sa.Column("champion", sa.String(128), nullable=True),
        sa.Column("candidate", sa.String(128), nullable=True),
        sa.Column("gate_passed", sa.Boolean, nullable=True),
        sa.Column("gate_report", postgresql.JSONB, nullable=True),
        sa.Column("promoted", sa.Boolean, nullable=False, server_default="false"),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("outputs", postgresql.JSONB, nullable=False, server_default="{}"),
        sa.Column("attempts", postgresql.JSONB, nullable=False, server_default="{}"),
        sa.Column("events", postgresql.JSONB, nullable=False, server_default="[]"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("step_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('queued', 'running', 'succeeded', 'failed')", name="ck_cycles_status"),
        sa.CheckConstraint("progress >= 0 AND progress <= 1", name="ck_cycles_progress"),
    )
    # exactly one active cycle, enforced by the database whoever inserts
    op.execute("CREATE UNIQUE INDEX uq_cycles_one_active ON cycles ((true)) WHERE status IN ('queued', 'running')")
    op.create_index("ix_cycles_created_at", "cycles", ["created_at"])


def downgrade() -> None:
    op.drop_table("cycles")
