"""The store tools over MCP, through the official SDK (`mcp.server.MCPServer`).

Every tool of a registry becomes an MCP tool with the registry's own name, description and
JSON schema, and annotations from its kind (read and generic tools are read-only; write
tools are destructive; the transfer tool is neither). Arguments pass untouched to
`ToolRegistry.call`, so an MCP client gets exactly the texts the chat agent would get
(`Error: ...` results are flagged `isError`). MCP callers are engineers and other agents:
they act with an explicit staff principal on the store they are pointed at (the live
store, or a sandbox's database), and every write is recorded in the audit log.

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
from mcp.server.mcpserver.tools.base import Tool as MCPTool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.service_models import AuditEntry
from backend.tools.context import Principal, ToolContext
from backend.tools.registry import RETAIL, Tool, ToolKind, ToolRegistry

log = structlog.get_logger(__name__)

Connect = Callable[[], AbstractAsyncContextManager[AsyncConnection]]
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


def _mcp_tool(t: Tool, connect: Connect, registry: ToolRegistry, actor: str, audit_writes: bool) -> MCPTool:
    async def call(**arguments: Any) -> CallToolResult:
        # an argument left out (or null, which no tool accepts) is reported by the registry, not the SDK
        args = {k: v for k, v in arguments.items() if v is not None}
        async with connect() as conn:
            ctx = ToolContext(conn, principal=Principal.staff(actor))
            if not (audit_writes and t.kind is ToolKind.WRITE):
                result = await registry.call(ctx, t.name, args)
            else:  # the write and its audit row commit together, or neither does
                try:
                    async with conn.begin():
                        await conn.execute(_SYNC_COMMIT)  # writes wait for their WAL flush
                        result = await registry.call(ctx, t.name, args)
                        if result.ok:
                            await _audit(conn, actor, t.name, args)
                except Exception as e:
                    log.exception("mcp.audit_failed", tool=t.name)
                    text = f"Error: the change was not made because it could not be audited ({type(e).__name__})"
                    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        log.info("mcp.tool_call", tool=t.name, outcome=result.outcome, ms=round(result.elapsed_ms, 2))
        return CallToolResult(content=[TextContent(type="text", text=result.output)], is_error=not result.ok)

    call.__name__ = t.name
    call.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Any)
         for p in t.params],
        return_annotation=CallToolResult,
    )
    call.__annotations__ = {p.name: Any for p in t.params} | {"return": CallToolResult}
    mcp_tool = MCPTool.from_function(call, name=t.name, description=t.description,
                                     annotations=annotations_for(t), structured_output=False)
    # publish the registry's schema (array item types, enums, descriptions), not the wrapper's
    mcp_tool.parameters = t.parameters
    return mcp_tool


async def _audit(conn: AsyncConnection, actor: str, tool: str, arguments: dict[str, Any]) -> None:
    await conn.execute(insert(AuditEntry.__table__).values(
        event="staff_tool_call", actor=actor, tool=tool,
        arguments=json.loads(json.dumps(arguments, default=str)), reason="",
    ))
