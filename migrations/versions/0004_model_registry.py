"""Model registry: immutable versions, serving aliases, append-only events, gate reports;
transcripts record the model version that wrote each assistant message.

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NOW = sa.text("now()")
_IMMUTABLE = ("model_versions", "model_events", "model_gate_reports")


def upgrade() -> None:
    op.execute("CREATE SEQUENCE model_version_seq")
    op.create_table(
        "model_versions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("seq", sa.BigInteger, nullable=False, unique=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("artifact_uri", sa.Text, nullable=False),
        sa.Column("artifact_sha256", sa.String(64), nullable=True),
        sa.Column("files", postgresql.JSONB, nullable=False, server_default="{}"),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("base_version_id", sa.String(32), sa.ForeignKey("model_versions.id"), nullable=True),
        sa.Column("parent_version_id", sa.String(32), sa.ForeignKey("model_versions.id"), nullable=True),
        sa.Column("recipe", postgresql.JSONB, nullable=True),
        sa.Column("training_run", sa.String(256), nullable=True),
        sa.Column("store_snapshot", sa.String(256), nullable=True),
        sa.Column("training_metrics", postgresql.JSONB, nullable=True),
        sa.Column("view", postgresql.JSONB, nullable=True),
        sa.Column("engine", sa.String(16), nullable=False),
        sa.Column("served_name", sa.String(256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.CheckConstraint("kind IN ('full', 'adapter')", name="ck_model_versions_kind"),
        sa.CheckConstraint("engine IN ('vllm', 'local', 'external')", name="ck_model_versions_engine"),
        sa.CheckConstraint("kind = 'full' OR base_version_id IS NOT NULL", name="ck_model_versions_adapter_base"),
    )
    op.create_index("ix_model_versions_engine_served", "model_versions", ["engine", "served_name"])
    op.create_table(
        "model_aliases",
        sa.Column("alias", sa.String(16), primary_key=True),
        sa.Column("version_id", sa.String(32), sa.ForeignKey("model_versions.id"), nullable=True),
        sa.Column("generation", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.CheckConstraint("alias IN ('champion', 'previous', 'candidate')", name="ck_model_aliases_alias"),
    )
    op.execute("INSERT INTO model_aliases (alias) VALUES ('champion'), ('previous'), ('candidate')")
    op.create_table(
        "model_gate_reports",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("candidate_id", sa.String(32), sa.ForeignKey("model_versions.id"), nullable=False),
        sa.Column("baseline_id", sa.String(32), sa.ForeignKey("model_versions.id"), nullable=True),
        sa.Column("passed", sa.Boolean, nullable=False),
        sa.Column("suite", sa.Text, nullable=True),
        sa.Column("report", postgresql.JSONB, nullable=False),
        sa.Column("markdown", sa.Text, nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
    )
    op.create_index("ix_model_gate_reports_candidate", "model_gate_reports", ["candidate_id"])
    op.create_table(
        "model_events",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("version_id", sa.String(32), sa.ForeignKey("model_versions.id"), nullable=True),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
        sa.Column("from_version_id", sa.String(32), nullable=True),
        sa.Column("to_version_id", sa.String(32), nullable=True),
        sa.Column("gate_report_id", sa.BigInteger, sa.ForeignKey("model_gate_reports.id"), nullable=True),
        sa.Column("details", postgresql.JSONB, nullable=False, server_default="{}"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, server_default=_NOW),
        sa.CheckConstraint("kind IN ('register', 'gate', 'promote', 'rollback', 'retire', 'alias')",
                           name="ck_model_events_kind"),
    )
    op.create_index("ix_model_events_version", "model_events", ["version_id"])
    # immutability is the database's rule, not a convention of our code
    op.execute("""
        CREATE FUNCTION muarl_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION '% rows are immutable (% refused)', TG_TABLE_NAME, TG_OP
            USING ERRCODE = 'restrict_violation';
        END $$""")
    for table in _IMMUTABLE:
        op.execute(f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table} "
                   "FOR EACH ROW EXECUTE FUNCTION muarl_refuse_change()")
    op.add_column("conversation_messages", sa.Column("model_version", sa.String(32), nullable=True))
    op.add_column("conversation_tool_calls", sa.Column("model_version", sa.String(32), nullable=True))


def downgrade() -> None:
    op.drop_column("conversation_tool_calls", "model_version")
    op.drop_column("conversation_messages", "model_version")
    for table in _IMMUTABLE:
        op.execute(f"DROP TRIGGER {table}_immutable ON {table}")
    op.execute("DROP FUNCTION muarl_refuse_change()")
    op.drop_index("ix_model_events_version", table_name="model_events")
    op.drop_table("model_events")
    op.drop_index("ix_model_gate_reports_candidate", table_name="model_gate_reports")
    op.drop_table("model_gate_reports")
    op.drop_table("model_aliases")
    op.drop_index("ix_model_versions_engine_served", table_name="model_versions")
    op.drop_table("model_versions")
    op.execute("DROP SEQUENCE model_version_seq")
