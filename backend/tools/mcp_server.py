"""The store tools over MCP, through the official SDK (`mcp.server.MCPServer`).

Every tool of a registry becomes an MCP tool with the registry's own name, description and
JSON schema, and annotations from its kind (read and generic tools are read-only; write
tools are destructive; the transfer tool is neither). Arguments pass untouched to
`ToolRegistry.call`, so an MCP client gets exactly the texts the chat agent would get
(`Error: ...` results are flagged `isError`). MCP callers are engineers and other agents:
they act with an explicit staff principal on the store they are pointed at (the live
store, or a sandbox's database). The audit log records, under the caller's identity
(`mcp:<client>` over HTTP, the server's actor over stdio), every write (`staff_tool_call`),
every refused write (`staff_write_refused`) and every read of customer records
(`staff_read`); a call whose audit row cannot be written is not served.

The same server runs over stdio (`muarl mcp --stdio`) or over streamable HTTP mounted at
`/mcp` on the API, where a bearer token guards it (see `backend.api.mcp_mount`).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import structlog
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools.base import Tool as MCPTool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.service_models import AuditEntry
from backend.tools.context import Principal, ToolContext
from backend.tools.registry import RETAIL, Tool, ToolKind, ToolRegistry

log = structlog.get_logger(__name__)

Connect = Callable[[], AbstractAsyncContextManager[AsyncConnection]]
MCP_CLIENT_KEY = "muarl.mcp_client"  # set in the HTTP request's scope by the endpoint's token check
_SYNC_COMMIT = text("SET LOCAL synchronous_commit TO on")

INSTRUCTIONS = (
    "Tools of the muarl online store (customers, orders, products). Calls act as staff on the "
    "store this server points at; write tools change it for real and are audited."
)


def annotations_for(t: Tool) -> ToolAnnotations:
    return ToolAnnotations(
        title=t.name.replace("_", " "),
        read_only_hint=t.read_only,
        destructive_hint=t.kind is ToolKind.WRITE,
        idempotent_hint=t.read_only,
        open_world_hint=False,
    )


def build_mcp_server(connect: Connect, registry: ToolRegistry = RETAIL, *, actor: str = "mcp",
                     audit_writes: bool = True) -> MCPServer:
    """An MCP server exposing `registry` on the store reached through `connect()`."""
    tools = [_mcp_tool(t, connect, registry, actor, audit_writes) for t in registry]
    # log_level: the SDK otherwise installs an INFO-level root handler (every HTTP call logged)
    server = MCPServer("muarl-store", instructions=INSTRUCTIONS, tools=tools, log_level="WARNING")
    logging.getLogger("mcp").setLevel(logging.WARNING)
    return server


def _caller(context: Context | None, default: str) -> str:
    """The audit identity of the call: the HTTP client's name, else the server's actor (stdio)."""
    try:
        request = context.request_context.request if context is not None else None
    except ValueError:  # no request context (not called through a session)
        request = None
    scope = getattr(request, "scope", None) or {}
    client = scope.get(MCP_CLIENT_KEY)
    return f"mcp:{client}"[:64] if client else default


def _audit_event(t: Tool, ok: bool) -> str | None:
    if t.kind is ToolKind.WRITE:
        return "staff_tool_call" if ok else "staff_write_refused"
    if t.read_only and t.customer_data:
        return "staff_read"
    return None


def _mcp_tool(t: Tool, connect: Connect, registry: ToolRegistry, actor: str, audit_writes: bool) -> MCPTool:
    audited = audit_writes and (t.kind is ToolKind.WRITE or (t.read_only and t.customer_data))

    async def call(mcp_context: Context | None = None, **arguments: Any) -> CallToolResult:
        # an argument left out (or null, which no tool accepts) is reported by the registry, not the SDK
        args = {k: v for k, v in arguments.items() if v is not None}
        caller = _caller(mcp_context, actor)
        async with connect() as conn:
            ctx = ToolContext(conn, principal=Principal.staff(caller))
            if not audited:
                result = await registry.call(ctx, t.name, args)
            else:  # the call and its audit row commit together, or the call is not served
                try:
                    async with conn.begin():
                        if t.kind is ToolKind.WRITE:
                            await conn.execute(_SYNC_COMMIT)  # writes wait for their WAL flush
                        result = await registry.call(ctx, t.name, args)
                        event = _audit_event(t, result.ok)
                        assert event is not None
                        await _audit(conn, event, caller, t.name, args, "" if result.ok else result.output)
                except Exception as e:
                    log.exception("mcp.audit_failed", tool=t.name)
                    what = "change was not made" if t.kind is ToolKind.WRITE else "call was not served"
                    text = f"Error: the {what} because it could not be audited ({type(e).__name__})"
                    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        log.info("mcp.tool_call", tool=t.name, caller=caller, outcome=result.outcome, ms=round(result.elapsed_ms, 2))
        return CallToolResult(content=[TextContent(type="text", text=result.output)], is_error=not result.ok)

    call.__name__ = t.name
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("mcp_context", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Context)]
        + [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Any)
           for p in t.params],
        return_annotation=CallToolResult,
    )
    call.__annotations__ = {"mcp_context": Context} | {p.name: Any for p in t.params} | {"return": CallToolResult}
    mcp_tool = MCPTool.from_function(call, name=t.name, description=t.description, context_kwarg="mcp_context",
                                     annotations=annotations_for(t), structured_output=False)
    # publish the registry's schema (array item types, enums, descriptions), not the wrapper's
    mcp_tool.parameters = t.parameters
    return mcp_tool


async def _audit(conn: AsyncConnection, event: str, actor: str, tool: str, arguments: dict[str, Any],
                 reason: str) -> None:
    await conn.execute(insert(AuditEntry.__table__).values(
        event=event, actor=actor, tool=tool, arguments=json.loads(json.dumps(arguments, default=str)),
        reason=reason.replace("\x00", "\ufffd"),
    ))
