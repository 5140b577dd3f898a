"""Registered MCP clients: each engineer or agent that calls `/mcp` has its own token, and its
name is its identity in the audit log (`mcp:<name>`). Only a token's SHA-256 is stored; the
token itself is shown once, when the client is added (`muarl mcp-clients add NAME`). A revoked
client's token stops working at its next request (tokens are looked up on every request)."""

from __future__ import annotations

import datetime as dt
import re
import secrets
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.api.conversation_store import hash_token

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,47}")


class ClientNameError(ValueError):
    pass


@dataclass
class McpClientInfo:
    name: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ClientNameError(f"{name!r} is not a client name: 1-48 of a-z 0-9 . _ -, starting with a letter or digit")
    return name


async def add_client(conn: AsyncConnection, name: str) -> str:
    """Register `name` (a revoked name is registered afresh) and return its new token."""
    check_name(name)
    token = secrets.token_urlsafe(32)
    added = await conn.scalar(text(
        "INSERT INTO mcp_clients (name, token_hash) VALUES (:n, :h) "
        "ON CONFLICT (name) DO UPDATE SET token_hash = :h, created_at = now(), revoked_at = NULL "
        "WHERE mcp_clients.revoked_at IS NOT NULL RETURNING name"), {"n": name, "h": hash_token(token)})
    if added is None:
        raise ClientNameError(f"an MCP client named {name!r} exists; revoke it first to give it a new token")
    return token


async def list_clients(conn: AsyncConnection) -> list[McpClientInfo]:
    rows = await conn.execute(text("SELECT name, created_at, revoked_at FROM mcp_clients ORDER BY name"))
    return [McpClientInfo(*r) for r in rows]


async def revoke_client(conn: AsyncConnection, name: str) -> bool:
    """Revoke `name`'s token; False when no active client has that name."""
    revoked = await conn.scalar(text("UPDATE mcp_clients SET revoked_at = now() "
                                     "WHERE name = :n AND revoked_at IS NULL RETURNING name"), {"n": name})
    return revoked is not None


async def identify(conn: AsyncConnection, token: str) -> str | None:
    """The name of the active client whose token this is, or None."""
    return await conn.scalar(text("SELECT name FROM mcp_clients WHERE token_hash = :h AND revoked_at IS NULL"),
                             {"h": hash_token(token)})
