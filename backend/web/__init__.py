"""The browser pages the API serves itself: the customer chat at `GET /` and the ops console at
`GET /ops`. Plain HTML, CSS and JavaScript kept in `backend/web/static` as package data (no CDN,
no build step): the pages call the same HTTP API as any client (the conversation's token and the
ops token stay in the tab's sessionStorage and travel only in Authorization headers)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
# the pages' own policy: only this origin's scripts, styles and API; nothing framed, nothing inline run
_HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
            "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def chat_page() -> FileResponse:
    return FileResponse(STATIC / "chat.html", headers=_HEADERS)


@router.get("/ops")
async def ops_page() -> FileResponse:
    return FileResponse(STATIC / "ops.html", headers=_HEADERS)


def install_web(app: FastAPI) -> None:
    """Serve the chat, the console and their assets (`/static/...`)."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
