"""ORM models of the model registry: immutable model versions, the serving aliases
(`champion`, `previous`, `candidate`), the append-only event log and stored gate reports.

Versions, events and gate reports are never changed after they are written: the migration
installs triggers that refuse UPDATE and DELETE on them, so immutability holds whatever code
touches the database. Only the three alias rows change, always under a row lock in one
transaction; each change bumps the alias row's `generation`, and the serving side reads the
highest generation to know whether its cached champion is stale.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, ForeignKey, Index, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base

ALIASES = ("champion", "previous", "candidate")
KINDS = ("full", "adapter")
ENGINES = ("vllm", "local", "external")
EVENT_KINDS = ("register", "gate", "promote", "rollback", "retire", "alias")


class ModelVersion(Base):
    __tablename__ = "model_versions"
    __table_args__ = (Index("ix_model_versions_engine_served", "engine", "served_name"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)  # "v<seq>"
    seq: Mapped[int] = mapped_column(BigInteger, unique=True, nullable=False)
    name: Mapped[str] = mapped_column(String(128), nullable=False)
    # a folder on disk for models we trained, the endpoint URL for external ones
    artifact_uri: Mapped[str] = mapped_column(Text, nullable=False)
    artifact_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    files: Mapped[dict[str, str]] = mapped_column(JSONB, nullable=False, server_default="{}")  # path -> sha256
    kind: Mapped[str] = mapped_column(String(16), nullable=False)  # full | adapter
    base_version_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("model_versions.id"), nullable=True)
    parent_version_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("model_versions.id"),
                                                          nullable=True)
    recipe: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    training_run: Mapped[str | None] = mapped_column(String(256), nullable=True)
    store_snapshot: Mapped[str | None] = mapped_column(String(256), nullable=True)
    training_metrics: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    view: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)  # how it must be prompted
    engine: Mapped[str] = mapped_column(String(16), nullable=False)  # vllm | local | external
    served_name: Mapped[str] = mapped_column(String(256), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())


class ModelAlias(Base):
    __tablename__ = "model_aliases"

    alias: Mapped[str] = mapped_column(String(16), primary_key=True)
    version_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("model_versions.id"), nullable=True)
    generation: Mapped[int] = mapped_column(BigInteger, nullable=False, server_default="0")
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())


class GateReport(Base):
    __tablename__ = "model_gate_reports"
    __table_args__ = (Index("ix_model_gate_reports_candidate", "candidate_id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    candidate_id: Mapped[str] = mapped_column(String(32), ForeignKey("model_versions.id"), nullable=False)
    # the champion it was played against (None: there was no champion, the floor applied)
    baseline_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("model_versions.id"), nullable=True)
    passed: Mapped[bool] = mapped_column(Boolean, nullable=False)
    suite: Mapped[str | None] = mapped_column(Text, nullable=True)
    report: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    markdown: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())


class ModelEvent(Base):
    __tablename__ = "model_events"
    __table_args__ = (Index("ix_model_events_version", "version_id"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)  # see EVENT_KINDS
    version_id: Mapped[str | None] = mapped_column(String(32), ForeignKey("model_versions.id"), nullable=True)
    actor: Mapped[str] = mapped_column(String(128), nullable=False)
    reason: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    from_version_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    to_version_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    gate_report_id: Mapped[int | None] = mapped_column(BigInteger, ForeignKey("model_gate_reports.id"),
                                                       nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False,
                                                    server_default=func.now())
