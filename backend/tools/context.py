"""What a store tool runs with: a database connection, who is asking, and the mode.

`ToolContext` is the only thing tools know about the world. A *principal* is either staff
(gold replays, ops tooling, `muarl tau` commands: every record is visible) or a customer
conversation, which starts unauthenticated and is bound to one customer by the first
successful `find_user_id_by_*` call. Tools ask the context before touching a customer's
records; a refusal raises `AccessDenied`, which the registry turns into an `Error: ...`
text for the model and reports to the context's `on_denied` hooks (the service writes
them to the audit log). Another customer's record is refused with the same words as a
missing one ("order not found"), so a conversation cannot learn which ids exist; only the
audit reason says what really happened.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncConnection


class ToolError(Exception):
    """A tool refuses: the message is shown to the model as `Error: <message>`."""


class AccessDenied(ToolError):
    """The conversation may not see or change this record. `str(e)` is what the caller is told;
    `audit_reason` (default: the same) is what the audit log records."""

    def __init__(self, message: str, *, audit_reason: str | None = None) -> None:
        super().__init__(message)
        self.audit_reason = audit_reason or message


@dataclass
class Principal:
    """Who a tool call acts for."""

    kind: Literal["staff", "customer"]
    user_id: str | None = None  # the authenticated customer (customer principals only)
    name: str = ""

    @classmethod
    def staff(cls, name: str = "staff") -> Principal:
        return cls(kind="staff", name=name)

    @classmethod
    def customer(cls, user_id: str | None = None) -> Principal:
        return cls(kind="customer", user_id=user_id)

    @property
    def is_staff(self) -> bool:
        return self.kind == "staff"


@dataclass
class DeniedCall:
    """A refused tool call, as reported to `on_denied` hooks."""

    tool: str
    arguments: dict
    reason: str
    principal_user_id: str | None


DeniedHook = Callable[[DeniedCall], Awaitable[None]]


@dataclass
class ToolContext:
    """Everything a tool call needs.

    `upstream_compat` reproduces tau-bench's behaviour exactly, money bugs included
    (see docs/DEVIATIONS.md); the default is the corrected behaviour.
    """

    conn: AsyncConnection
    principal: Principal = field(default_factory=Principal.staff)
    upstream_compat: bool = False
    clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    on_denied: list[DeniedHook] = field(default_factory=list)
    max_string_length: int = 10_000

    # -- authorization -------------------------------------------------------------------

    def require_authenticated(self) -> None:
        """Refuse customer-data tools until the conversation has identified its customer."""
        if not self.principal.is_staff and self.principal.user_id is None:
            raise AccessDenied(
                "the customer must be authenticated first (find_user_id_by_email or "
                "find_user_id_by_name_zip)"
            )

    def check_owner(self, owner_user_id: str, what: str, missing: str) -> None:
        """Refuse access to a record owned by someone other than the authenticated customer,
        saying `missing` (the words for a record that does not exist)."""
        if self.principal.is_staff:
            return
        self.require_authenticated()
        if owner_user_id != self.principal.user_id:
            raise AccessDenied(missing, audit_reason=f"{what} does not belong to the authenticated customer")

    def bind_customer(self, user_id: str) -> None:
        """Bind an unauthenticated customer conversation to `user_id` (no-op for staff)."""
        if self.principal.is_staff:
            return
        if self.principal.user_id is not None and self.principal.user_id != user_id:
            raise AccessDenied(
                "this conversation is already authenticated as another customer; "
                "a different customer must start a new conversation"
            )
        self.principal.user_id = user_id
