"""Errors as problem JSON (RFC 9457): every error the API returns is a small JSON document
with a title and a detail a client can show, never a traceback.

Routes and services raise `Problem`; FastAPI's own HTTP and validation errors and any
unexpected exception are turned into the same shape by the handlers installed here.
"""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = structlog.get_logger(__name__)

PROBLEM_JSON = "application/problem+json"

_TITLES = {
    400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found", 405: "Method not allowed",
    409: "Conflict", 413: "Content too large", 422: "Invalid request", 429: "Too many requests",
    500: "Internal error", 503: "Service unavailable",
}


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


def problem_response(status: int, detail: str, *, title: str | None = None, instance: str | None = None,
                     headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"type": "about:blank", "title": title or _TITLES.get(status, "Error"),
                            "status": status, "detail": detail}
    if instance:
        body["instance"] = instance
    body.update(extra)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


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

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("api.unhandled_error", path=request.url.path)
        return problem_response(500, "Something went wrong on our side; please try again.",
                                instance=request.url.path)
