"""Liveness, readiness and metrics: `/healthz` (the process answers), `/readyz` (the store's
database is reachable and migrated; says which model version answers, if any), `/metrics`
(Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from sqlalchemy import text

from backend.api.deps import ChatDep, EngineDep
from backend.api.metrics import metrics_response
from backend.api.problems import problem_response

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None, responses={503: {"description": "not ready"}})
async def readyz(engine: EngineDep, chat: ChatDep) -> Response | dict[str, object]:
    """Ready to serve: the database answers and has the service tables."""
    try:
        async with engine.connect() as conn:
            revision = await conn.scalar(text("SELECT version_num FROM alembic_version"))
            await conn.scalar(text("SELECT 1 FROM conversations LIMIT 1"))
    except Exception as e:
        return problem_response(503, f"The database is not ready: {type(e).__name__}", title="Not ready")
    try:
        target = await chat.resolver.resolve()
    except Exception as e:  # the registry's tables are missing or unreadable
        return problem_response(503, f"The model registry is not readable: {type(e).__name__}", title="Not ready")
    return {"status": "ready", "database_revision": revision,
            "model": target.served_name if target is not None else None,
            "model_version": target.version_id if target is not None else None,
            "model_configured": target is not None}


@router.get("/metrics", include_in_schema=False)
async def metrics() -> Response:
    return metrics_response()
