"""Errors as problem JSON (RFC 9457): every error the API returns is a small JSON document
with a title and a detail a client can show, never a traceback.

Routes and services raise `Problem`; FastAPI's own HTTP and validation errors, a database
that cannot serve (503 with `Retry-After`) and any unexpected exception are turned into the
same shape by the handlers installed here. `problem_responses(...)` declares a route's errors
in the OpenAPI document, all with the one `Problem` schema under `application/problem+json`.
"""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.api.unavailable import RETRY_AFTER_S, database_unavailable, unavailable_detail

log = structlog.get_logger(__name__)

PROBLEM_JSON = "application/problem+json"
MAX_INSTANCE_CHARS = 200  # a path is echoed back, but never an unbounded one

_TITLES = {
    400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found", 405: "Method not allowed",
    409: "Conflict", 413: "Content too large", 422: "Invalid request", 429: "Too many requests",
    500: "Internal error", 503: "Service unavailable",
}

_MEANINGS = {
    400: "The request is malformed",
    401: "No or no valid bearer token",
    403: "The token does not open this resource",
    404: "No such resource",
    409: "The conversation is busy (another message is being answered) or was handed to a human",
    413: "The message or the request body is too large",
    422: "The request body or parameters are invalid; `errors` lists each problem",
    429: "A rate limit or quota was reached",
    500: "An unexpected error on the service's side",
    503: "Not available right now (database unreachable or not migrated, no model configured)",
}
_RETRY_AFTER_STATUSES = {409, 429, 503}


class ProblemDetails(BaseModel):
    """An error (RFC 9457 problem details)."""

    type: str = Field("about:blank", description="Always about:blank: the status says what kind of error")
    title: str = Field(description="A short summary of the status")
    status: int = Field(description="The HTTP status code")
    detail: str = Field(description="What went wrong, in words a client can show")
    instance: str | None = Field(None, description="The request path")
    errors: list[dict[str, str]] | None = Field(
        None, description="422 only: each invalid field (`location`, `message`)")


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI `responses` entries of a route's errors (see `install_problem_schema`)."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        entry: dict[str, Any] = {
            "description": _MEANINGS.get(status, _TITLES.get(status, "Error")),
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        if status in _RETRY_AFTER_STATUSES:
            entry["headers"] = {"Retry-After": {"description": "Seconds to wait before retrying (when known)",
                                                "schema": {"type": "integer"}}}
        out[status] = entry
    return out


class Problem(Exception):
    """An HTTP error with a human-readable detail."""

    def __init__(self, status: int, detail: str, *, title: str | None = None,
                 headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title or _TITLES.get(status, "Error")
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra


def shown(value: str, limit: int = 40) -> str:
    """A client-supplied value as an error message may echo it: repr'd, at most `limit` characters."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value)} characters)"


def problem_response(status: int, detail: str, *, title: str | None = None, instance: str | None = None,
                     headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"type": "about:blank", "title": title or _TITLES.get(status, "Error"),
                            "status": status, "detail": detail}
    if instance:
        body["instance"] = instance[:MAX_INSTANCE_CHARS]
    body.update(extra)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def unavailable_response(reason: str, instance: str | None = None) -> JSONResponse:
    return problem_response(503, unavailable_detail(reason), instance=instance,
                            headers={"Retry-After": str(RETRY_AFTER_S)})


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return problem_response(exc.status, exc.detail, title=exc.title, instance=request.url.path,
                                headers=exc.headers, **exc.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return problem_response(exc.status_code, detail, instance=request.url.path,
                                headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"location": ".".join(str(p) for p in e.get("loc", ())), "message": e.get("msg", "")}
            for e in exc.errors()
        ]
        detail = "; ".join(f"{e['location']}: {e['message']}" for e in errors) or "invalid request"
        return problem_response(422, detail, instance=request.url.path, errors=errors)

    async def _database(request: Request, exc: Exception) -> JSONResponse:
        reason = database_unavailable(exc)
        if reason is None:
            return await _unexpected(request, exc)
        log.warning("api.database_unavailable", path=request.url.path[:MAX_INSTANCE_CHARS], reason=reason,
                    error=repr(exc)[:300])
        return unavailable_response(reason, request.url.path)

    # database failures reach these handlers (not the catch-all below, which re-raises after answering)
    for error_class in (sa_exc.SQLAlchemyError, OSError, *_asyncpg_errors()):
        app.add_exception_handler(error_class, _database)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("api.unhandled_error", path=request.url.path[:MAX_INSTANCE_CHARS])
        return problem_response(500, "Something went wrong on our side; please try again.",
                                instance=request.url.path)


def _asyncpg_errors() -> tuple[type[Exception], ...]:
    import asyncpg

    return (asyncpg.PostgresError, asyncpg.InterfaceError)


def install_problem_schema(app: FastAPI) -> None:
    """Generate the OpenAPI document with the `Problem` schema that `problem_responses` refers to,
    and without FastAPI's default `HTTPValidationError` (our 422 is problem JSON)."""
    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = default_openapi()
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        schemas["Problem"] = ProblemDetails.model_json_schema(ref_template="#/components/schemas/{model}")
        uses_default_422 = any(
            "HTTPValidationError" in str(op.get("responses", {}).get("422", ""))
            for ops in doc.get("paths", {}).values() for op in ops.values() if isinstance(op, dict))
        if not uses_default_422:
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
        app.openapi_schema = doc
        return doc

    app.openapi = openapi  # type: ignore[method-assign]
