"""ORM model of the online cycle's state (one row per cycle), written by the Celery worker
(rl/pipeline) and read by the API and the CLI.

At most one cycle is active (`queued` or `running`) at a time: a partial unique index on a
constant over active rows makes a second insert fail inside the database, whatever process
tries it. `outputs` holds each finished step's result, so a step that runs again (a message
delivered twice, a restarted worker) returns that result instead of redoing the work.
`dispatched_at` is when the next step's message was sent and nobody has started it yet (NULL
while a step runs): the recovery pass uses it to tell a message still waiting from one lost.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import DateTime, Float, Index, String, Text, func, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base

STEPS = ("snapshot", "tasks", "train", "gate", "promote")
ACTIVE = ("queued", "running")
FINISHED = ("succeeded", "failed")


class Cycle(Base):
    __tablename__ = "cycles"
    __table_args__ = (
        Index("uq_cycles_one_active", text("(true)"), unique=True,
              postgresql_where=text("status IN ('queued', 'running')")),
        Index("ix_cycles_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    # "queued" | "running" | "succeeded" | "failed"
    status: Mapped[str] = mapped_column(String(16), nullable=False, server_default="queued")
    trigger: Mapped[str] = mapped_column(String(32), nullable=False, server_default="manual")
    recipe: Mapped[str] = mapped_column(String(64), nullable=False)
    overrides: Mapped[list[str]] = mapped_column(JSONB, nullable=False, server_default="[]")
    step: Mapped[str] = mapped_column(String(16), nullable=False, server_default="snapshot")
    # progress inside the current step: a fraction, seconds left (None: unknown) and what it does
    progress: Mapped[float] = mapped_column(Float, nullable=False, server_default="0")
    eta_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    detail: Mapped[str | None] = mapped_column(Text, nullable=True)
    snapshot: Mapped[str | None] = mapped_column(String(63), nullable=True)
    champion: Mapped[str | None] = mapped_column(String(128), nullable=True)  # the version trained from / gated against
    candidate: Mapped[str | None] = mapped_column(String(128), nullable=True)
    gate_passed: Mapped[bool | None] = mapped_column(nullable=True)
    gate_report: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    promoted: Mapped[bool] = mapped_column(nullable=False, server_default="false")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    outputs: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, server_default="{}")
    attempts: Mapped[dict[str, int]] = mapped_column(JSONB, nullable=False, server_default="{}")
    events: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, nullable=False, server_default="[]")
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    step_started_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    dispatched_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
