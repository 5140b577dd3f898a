"""Ops HTTP for the escalation queue (`RequireOps`: Bearer `MUARL_OPS_TOKEN`): list the conversations that ended
with a transfer to a human, read one with its transcript and the staff writes made on its
customer since, and resolve or dismiss it. A resolved escalation becomes a training task in the
next cycle (its state then reads `mined`)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from backend import escalations as q
from backend.api.deps import EngineDep, RequireOps
from backend.api.problems import Problem, problem_responses

router = APIRouter(prefix="/v1/ops/escalations", tags=["ops: escalations"],
                   responses=problem_responses(401, 403, 422, 500, 503))  # errors are problem JSON

State = Literal["open", "resolved", "mined", "dismissed"]
EscalationId = Annotated[int, Path(ge=1, le=2**62, description="The escalation's id")]


class Escalation(BaseModel):
    id: int
    conversation_id: str
    customer_user_id: str | None
    state: State
    summary: str = Field(description="what the agent told the human agent when it transferred")
    created_at: dt.datetime
    updated_at: dt.datetime
    resolved_at: dt.datetime | None
    resolved_by: str | None
    note: str
    mined_at: dt.datetime | None


class StaffAction(BaseModel):
    id: int
    created_at: dt.datetime
    actor: str
    tool: str
    arguments: dict[str, Any]


class EscalationDetail(Escalation):
    transcript: list[dict[str, Any]]
    staff_actions: list[StaffAction] = Field(
        description="audited staff writes on this customer since the transfer (until the resolution): "
                    "the gold actions of the task mined from it")


class EscalationPage(BaseModel):
    items: list[Escalation]
    next_before_id: int | None = Field(description="pass as before_id for the next (older) page")


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str = Field(default="", max_length=4000)


def _public(row: q.EscalationRow) -> dict[str, Any]:
    return {k: v for k, v in vars(row).items() if k not in ("store_before", "mined_by")}


@router.get("", response_model=EscalationPage)
async def list_escalations(_: RequireOps, engine: EngineDep, state: State | None = None,
                           limit: Annotated[int, Query(ge=1, le=500)] = 50,
                           before_id: Annotated[int | None, Query(ge=1, le=2**62)] = None) -> EscalationPage:
    """The queue, newest first, optionally one state."""
    async with engine.connect() as conn:
        rows = await q.list_escalations(conn, state=state, limit=limit, before_id=before_id)
    items = [Escalation(**_public(r)) for r in rows]
    return EscalationPage(items=items, next_before_id=rows[-1].id if len(rows) == limit else None)


async def _detail(conn: Any, row: q.EscalationRow) -> EscalationDetail:
    actions = await q.staff_actions(conn, row)
    return EscalationDetail(**_public(row), transcript=await q.transcript(conn, row.conversation_id),
                            staff_actions=[StaffAction(**vars(a)) for a in actions])


@router.get("/{escalation_id}", response_model=EscalationDetail, responses=problem_responses(404))
async def get_escalation(_: RequireOps, engine: EngineDep, escalation_id: EscalationId) -> EscalationDetail:
    """One escalation with its transcript and the staff writes made on its customer."""
    async with engine.connect() as conn:
        try:
            row = await q.get_escalation(conn, escalation_id)
        except q.EscalationNotFound as e:
            raise Problem(404, str(e)) from None
        return await _detail(conn, row)


async def _decide(engine: Any, escalation_id: int, decision: Decision, actor: str, how: Any) -> EscalationDetail:
    async with engine.begin() as conn:
        try:
            row = await how(conn, escalation_id, actor=actor, note=decision.note)
        except q.EscalationNotFound as e:
            raise Problem(404, str(e)) from None
        except q.InvalidTransition as e:
            raise Problem(409, str(e)) from None
        return await _detail(conn, row)


@router.post("/{escalation_id}/resolve", response_model=EscalationDetail,
             responses=problem_responses(404, 409))
async def resolve_escalation(actor: RequireOps, engine: EngineDep, escalation_id: EscalationId,
                             decision: Decision) -> EscalationDetail:
    """open -> resolved: the customer's problem is dealt with; the next cycle mines it into a task.
    The deciding actor (`X-Ops-Actor`) is recorded."""
    return await _decide(engine, escalation_id, decision, actor, q.resolve)


@router.post("/{escalation_id}/dismiss", response_model=EscalationDetail,
             responses=problem_responses(404, 409))
async def dismiss_escalation(actor: RequireOps, engine: EngineDep, escalation_id: EscalationId,
                             decision: Decision) -> EscalationDetail:
    """open or resolved -> dismissed: it never becomes a task."""
    return await _decide(engine, escalation_id, decision, actor, q.dismiss)
