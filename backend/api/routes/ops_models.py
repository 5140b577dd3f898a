"""Ops endpoints of the model registry (Bearer MUARL_OPS_TOKEN): list versions, read one with its
gate reports and events, promote (409 unless it passed its gates against the champion, or
`skip_gates`), roll back to `previous`, read the event log. A promotion or rollback answers
once the alias moved; the next customer message is answered by the new champion."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from backend.api.deps import RegistryDep, RequireOps, SettingsDep
from backend.api.problems import Problem, problem_responses
from backend.serving import promotion
from backend.serving.registry import AliasChange, RegistryError

router = APIRouter(prefix="/v1/ops", tags=["ops: models"])

_MEANINGS = {
    401: "No ops token (Authorization: Bearer $MUARL_OPS_TOKEN)", 403: "Not the ops token",
    404: "No such model version",
    409: "Gates not passed against the current champion, version retired or already champion, no previous version",
    503: "Ops disabled (MUARL_OPS_TOKEN unset), the database unavailable, or the engine cannot serve the version",
}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    out = problem_responses(*statuses)
    for status, entry in out.items():
        entry["description"] = _MEANINGS.get(int(status), entry["description"])
    return out


class PromoteRequest(BaseModel):
    reason: str = Field(min_length=1, max_length=2000, description="Why (recorded in the event)")
    skip_gates: bool = Field(default=False, description="Promote without a passed gate report (the event says so)")


class RollbackRequest(BaseModel):
    reason: str = Field(min_length=1, max_length=2000, description="Why (recorded in the event)")


def _problem(e: RegistryError) -> Problem:
    return Problem(e.status, str(e))


def _change(change: AliasChange) -> dict[str, Any]:
    return {"champion": change.champion_after, "previous_champion": change.champion_before,
            "generation": change.generation, "event": change.event.to_json()}


@router.get("/models", responses=_errors(401, 403, 422, 500, 503))
async def list_models(_: RequireOps, registry: RegistryDep) -> list[dict[str, Any]]:
    """Every registered version, oldest first, with its aliases."""
    return [v.to_json() for v in await registry.list_versions()]


@router.get("/models/{version_id}", responses=_errors(401, 403, 404, 422, 500, 503))
async def read_model(version_id: str, _: RequireOps, registry: RegistryDep) -> dict[str, Any]:
    """One version with its files, gate reports (newest first) and events."""
    version = await registry.get(version_id)
    if version is None:
        raise Problem(404, f"There is no model version {version_id!r}.")
    return {**version.to_json(files=True),
            "gate_reports": [r.to_json() for r in await registry.gate_reports(version_id)],
            "events": [e.to_json() for e in await registry.events(version_id=version_id)]}


@router.post("/models/{version_id}/promote", responses=_errors(401, 403, 404, 409, 422, 500, 503))
async def promote_model(version_id: str, body: PromoteRequest, actor: RequireOps, registry: RegistryDep,
                        settings: SettingsDep) -> dict[str, Any]:
    """Make the version the champion (its engine loads it first)."""
    try:
        change = await promotion.promote(registry, version_id, reason=body.reason, actor=actor, settings=settings,
                                         skip_gates=body.skip_gates)
    except RegistryError as e:
        raise _problem(e) from None
    return _change(change)


@router.post("/rollback", responses=_errors(401, 403, 409, 422, 500, 503))
async def rollback(body: RollbackRequest, actor: RequireOps, registry: RegistryDep,
                   settings: SettingsDep) -> dict[str, Any]:
    """Make `previous` the champion again."""
    try:
        change = await promotion.rollback(registry, reason=body.reason, actor=actor, settings=settings)
    except RegistryError as e:
        raise _problem(e) from None
    return _change(change)


@router.get("/events", responses=_errors(401, 403, 422, 500, 503))
async def list_events(_: RequireOps, registry: RegistryDep,
                      version: str | None = Query(default=None, description="only events about this version"),
                      limit: int = Query(default=100, ge=1, le=1000)) -> list[dict[str, Any]]:
    """The registry's event log, newest first."""
    return [e.to_json() for e in await registry.events(version_id=version, limit=limit)]
