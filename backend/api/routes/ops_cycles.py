"""Ops endpoints of the online cycle (ops token required):
- `GET /v1/ops/cycles`: the active cycle (or null) and the recent ones, newest first;
- `POST /v1/ops/cycles` `{"recipe": NAME?, "overrides": [KEY=VALUE, ...]?}`: start a cycle now
  (202 with the new cycle); 409 while one is queued or running, 503 when the broker is unreachable.
The worker's start task is sent by name over the broker (`backend.cycles`); nothing here
imports `rl/`. A recipe name the worker does not know fails the cycle's first step with that reason.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, Field, field_validator
from starlette.concurrency import run_in_threadpool

from backend import cycles
from backend.api.deps import EngineDep, RequireOps, SettingsDep
from backend.api.problems import Problem, problem_responses

router = APIRouter(prefix="/v1/ops", tags=["ops"],
                   responses=problem_responses(401, 403, 422, 500, 503))  # errors are problem JSON
_NAME = re.compile(r"^[A-Za-z0-9._+=,-]{1,64}$")


class StartCycle(BaseModel):
    recipe: str | None = Field(default=None, description="recipe name (default MUARL_CYCLE_RECIPE)")
    overrides: list[str] = Field(default_factory=list, max_length=32, description="recipe settings KEY=VALUE")

    @field_validator("recipe")
    @classmethod
    def _recipe_name(cls, v: str | None) -> str | None:
        if v is not None and not _NAME.match(v):
            raise ValueError("a recipe name is 1-64 letters, digits and ._+=,-")
        return v

    @field_validator("overrides")
    @classmethod
    def _settings(cls, v: list[str]) -> list[str]:
        for item in v:
            if "=" not in item or len(item) > 200:
                raise ValueError(f"{item[:40]!r} is not KEY=VALUE (at most 200 characters)")
        return v


def _client(request: Request, settings: Any) -> Any:
    client = getattr(request.app.state, "celery_client", None)
    if client is None:
        from backend.broker import celery_client

        client = request.app.state.celery_client = celery_client(settings)
    return client


@router.get("/cycles")
async def list_cycles(_: RequireOps, engine: EngineDep,
                      limit: int = Query(default=20, ge=1, le=200)) -> dict[str, Any]:
    """The active cycle and the most recent cycles with their step, progress and results."""
    rows = [cycles.cycle_json(c) for c in await cycles.list_cycles(engine, limit)]
    active = await cycles.active_cycle(engine)
    return {"active": cycles.cycle_json(active) if active else None, "cycles": rows}


@router.post("/cycles", status_code=202, responses=problem_responses(409))
async def start_cycle(_: RequireOps, engine: EngineDep, settings: SettingsDep, request: Request,
                      body: StartCycle | None = None) -> dict[str, Any]:
    """Start a cycle now."""
    body = body or StartCycle()
    try:
        cycle = await cycles.create_cycle(engine, body.recipe or settings.cycle_recipe, overrides=body.overrides,
                                          trigger="ops")
    except cycles.CycleBusy as e:
        raise Problem(409, f"A cycle is already active: {e}.", active=cycles.cycle_json(e.active)) from None
    try:
        client = await run_in_threadpool(_client, request, settings)
        await run_in_threadpool(cycles.send_start, cycle.id, client)
    except Exception as e:
        await cycles.mark_failed(engine, cycle.id, f"could not enqueue the cycle: {e}")
        raise Problem(503, f"The cycle could not be enqueued (broker unreachable: {type(e).__name__}).") from None
    return cycles.cycle_json(cycle)
