"""ORM model of the escalation queue (migration 0006): one row per conversation that ended with
a transfer to a human. Its state moves `open -> resolved -> mined`, or to `dismissed`; the
customer's store records as they were when the conversation was transferred are kept with it
(`store_before`, tau-shaped), so a task mined from it can be replayed from that state after
ops have changed the live store."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, DateTime, ForeignKey, Index, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.models import Base

STATES = ("open", "resolved", "mined", "dismissed")


class Escalation(Base):
    __tablename__ = "escalations"
    __table_args__ = (
        CheckConstraint("state IN ('open', 'resolved', 'mined', 'dismissed')", name="ck_escalations_state"),
        Index("ix_escalations_state_created", "state", "created_at"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(
        String(64), ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False, unique=True)
    customer_user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    state: Mapped[str] = mapped_column(String(16), nullable=False, server_default="open")
    summary: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    # {"users": {id: record}, "orders": {id: record}}: the customer's records at transfer time
    store_before: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), nullable=False, server_default=func.now())
    resolved_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    resolved_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    note: Mapped[str] = mapped_column(Text, nullable=False, server_default="")
    mined_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    mined_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
