"""Serving the MCP server inside the API: `/mcp` guarded by bearer tokens, plus a limit on
request bodies for the whole app. Both are small ASGI wrappers in front of FastAPI, so the
MCP SDK's own Starlette app handles `/mcp` untouched once the token checks out.

A token is a registered client's (`muarl mcp-clients add NAME`, looked up on every request)
or `MUARL_MCP_TOKEN` (the operator's token, identity `env`). The client's name travels to
the tools in the request scope (`MCP_CLIENT_KEY`), so the audit log says who called."""

from __future__ import annotations

import hmac
import json

import structlog
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.api import mcp_clients
from backend.api.problems import PROBLEM_JSON
from backend.api.unavailable import RETRY_AFTER_S, database_unavailable, unavailable_detail
from backend.tools.mcp_server import MCP_CLIENT_KEY

log = structlog.get_logger(__name__)
ENV_CLIENT = "env"


async def send_problem(send: Send, status: int, title: str, detail: str,
                       headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def _bearer(scope: Scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


class McpEndpoint:
    """Sends `/mcp` to the MCP app when the request carries a known client's bearer token."""

    def __init__(self, app: ASGIApp, *, mcp_app: ASGIApp, token: str | None, engine: AsyncEngine,
                 path: str = "/mcp") -> None:
        self.app = app
        self.mcp_app = mcp_app
        self.token = token
        self.engine = engine
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == self.path or path.startswith(self.path + "/")):
            await self.app(scope, receive, send)
            return
        presented = _bearer(scope)
        client = None
        if presented:
            try:
                client = await self._identify(presented)
            except Exception as e:
                reason = database_unavailable(e)
                if reason is None:
                    raise
                log.warning("mcp.clients_unavailable", reason=reason)
                await send_problem(send, 503, "Service unavailable", unavailable_detail(reason),
                                   [(b"retry-after", str(RETRY_AFTER_S).encode())])
                return
        if client is None:
            await send_problem(send, 401, "Unauthorized",
                               "MCP needs 'Authorization: Bearer <token>' with a client's token "
                               "(`muarl mcp-clients add NAME`) or MUARL_MCP_TOKEN.",
                               [(b"www-authenticate", b"Bearer")])
            return
        await self.mcp_app({**scope, MCP_CLIENT_KEY: client}, receive, send)

    async def _identify(self, presented: str) -> str | None:
        if self.token and hmac.compare_digest(presented.encode(), self.token.encode()):
            return ENV_CLIENT
        async with self.engine.connect() as conn:
            return await mcp_clients.identify(conn, presented)


class BodyLimit:
    """Answers 413 to requests whose declared or actual body is larger than `max_bytes`."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await send_problem(send, 413, "Content too large",
                                   f"Request bodies are limited to {self.max_bytes} bytes.")
                return
        received = 0
        too_large = False

        async def limited_receive():
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    too_large = True
                    raise BodyTooLarge
            return message

        started = False

        async def tracking_send(message):
            nonlocal started
            if too_large:  # the app turned the aborted read into some other error: say what it was
                if not started:
                    started = True
                    await send_problem(send, 413, "Content too large",
                                       f"Request bodies are limited to {self.max_bytes} bytes.")
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await send_problem(send, 413, "Content too large",
                                   f"Request bodies are limited to {self.max_bytes} bytes.")


class BodyTooLarge(Exception):
    pass
