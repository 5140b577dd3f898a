"""CLI commands of the agent service (`muarl serve`, `muarl mcp`). Filled by the service work."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the service's commands to the `muarl` app."""
    del app
