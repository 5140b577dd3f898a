"""`muarl mcp-clients add NAME / list / revoke NAME`: the clients allowed to call `/mcp`, each
with its own token (printed once by `add`; only its hash is stored) and its name as identity in
the audit log. Acts on `DATABASE_URL` (or the embedded store)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True, soft_wrap=True)
app = typer.Typer(help="Clients of the MCP endpoint (/mcp), each with its own token.", no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="the client's name (its identity in the audit log)")]


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="mcp-clients")


async def _in_store(work):  # type: ignore[no-untyped-def]
    from backend.db.engine import database_url, make_engine

    engine = make_engine(database_url(), null_pool=True)
    try:
        async with engine.begin() as conn:
            return await work(conn)
    finally:
        await engine.dispose()


@app.command("add")
def add(name: Name) -> None:
    """Register a client and print its token (shown only this once)."""
    from backend.api.mcp_clients import ClientNameError, add_client

    try:
        token = asyncio.run(_in_store(lambda conn: add_client(conn, name)))
    except ClientNameError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    console.print(f"MCP client {name!r} added; its token (shown only now): use 'Authorization: Bearer <token>'")
    print(token)


@app.command("list")
def list_() -> None:
    """Every client: name, when it was added, whether it is revoked."""
    from backend.api.mcp_clients import list_clients

    for c in asyncio.run(_in_store(list_clients)):
        state = f"revoked {c.revoked_at.isoformat(timespec='seconds')}" if c.revoked_at else "active"
        print(f"{c.name}\tadded {c.created_at.isoformat(timespec='seconds')}\t{state}")


@app.command("revoke")
def revoke(name: Name) -> None:
    """Revoke a client's token at once."""
    from backend.api.mcp_clients import revoke_client

    if not asyncio.run(_in_store(lambda conn: revoke_client(conn, name))):
        console.print(f"[red]error:[/red] no active MCP client named {name!r}")
        raise typer.Exit(1)
    console.print(f"MCP client {name!r} revoked")
