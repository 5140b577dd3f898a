"""Liveness, readiness and metrics: `/healthz` (the process answers), `/readyz` (the store's
database is reachable and migrated; says which model version answers, if any), both also for
`HEAD`, and `/metrics` (Prometheus), which by default only loopback clients may read
(`MUARL_METRICS_ACCESS`: `loopback`, `open`, or `token` with `Bearer $MUARL_METRICS_TOKEN`)."""

from __future__ import annotations

import hmac
import ipaddress

from fastapi import APIRouter, Request, Response
from sqlalchemy import text

from backend.api.deps import ChatDep, EngineDep, SettingsDep
from backend.api.metrics import metrics_response
from backend.api.problems import Problem, problem_response, problem_responses
from backend.api.unavailable import RETRY_AFTER_S
from backend.config import Settings

router = APIRouter(tags=["health"])


@router.head("/healthz", include_in_schema=False)
@router.get("/healthz", responses=problem_responses(500))
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.head("/readyz", include_in_schema=False, response_model=None)
@router.get("/readyz", response_model=None, responses=problem_responses(500, 503))
async def readyz(engine: EngineDep, chat: ChatDep) -> Response | dict[str, object]:
    """Ready to serve: the database answers and has the service tables."""
    try:
        async with engine.connect() as conn:
            revision = await conn.scalar(text("SELECT version_num FROM alembic_version"))
            await conn.scalar(text("SELECT 1 FROM conversations LIMIT 1"))
    except Exception as e:
        return problem_response(503, f"The database is not ready: {type(e).__name__}", title="Not ready",
                                headers={"Retry-After": str(RETRY_AFTER_S)})
    try:
        target = await chat.resolver.resolve()
    except Exception as e:  # the registry's tables are missing or unreadable
        return problem_response(503, f"The model registry is not readable: {type(e).__name__}", title="Not ready",
                                headers={"Retry-After": str(RETRY_AFTER_S)})
    return {"status": "ready", "database_revision": revision,
            "model": target.served_name if target is not None else None,
            "model_version": target.version_id if target is not None else None,
            "model_configured": target is not None}


def _is_loopback(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_metrics_access(request: Request, settings: Settings) -> None:
    """Who may read /metrics: see the module docstring."""
    if settings.metrics_access == "open":
        return
    if settings.metrics_access == "token":
        scheme, _, presented = request.headers.get("authorization", "").partition(" ")
        if not settings.metrics_token:
            raise Problem(503, "MUARL_METRICS_ACCESS=token needs MUARL_METRICS_TOKEN to be set.")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(),
                                                                 settings.metrics_token.encode()):
            raise Problem(401, "/metrics needs 'Authorization: Bearer <MUARL_METRICS_TOKEN>'.",
                          headers={"WWW-Authenticate": "Bearer"})
        return
    if not _is_loopback(request):
        raise Problem(403, "/metrics is served to loopback clients only (MUARL_METRICS_ACCESS=loopback).")


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, settings: SettingsDep) -> Response:
    check_metrics_access(request, settings)
    return metrics_response()
