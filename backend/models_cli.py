"""`muarl models`: the model registry from the command line (backend only: no torch, no rl/).

- `muarl models register PATH [--name NAME] [--parent ID] [--base ID] [--engine local|vllm]`
  prints one JSON object (the version, with "id");
- `muarl models list [--json]` (`--json`: a JSON array of versions with "aliases");
- `muarl models show ID` prints a version with its gate reports and events as JSON;
- `muarl models promote ID --reason TEXT [--skip-gates]` exits 1 unless the version has a
  passed gate report against the current champion (`--skip-gates` promotes anyway and the
  event says so); the version's engine loads it before the alias moves;
- `muarl models rollback --reason TEXT` makes `previous` the champion again;
- `muarl models retire ID --reason TEXT`.
All act on the store's database (DATABASE_URL, else the embedded server).
"""

from __future__ import annotations

import asyncio
import getpass
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

console = Console(stderr=True, soft_wrap=True)
models_app = typer.Typer(help="Model registry: register, list, promote, roll back.", no_args_is_help=True)
T = TypeVar("T")

Reason = Annotated[str, typer.Option("--reason", help="why (recorded in the event)")]


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")


def actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no user name in this environment
        return "cli"


def _run(work: Callable[[Any], Awaitable[T]]) -> T:
    """Run `work(registry)` on the store's database; registry errors exit 1 with their message."""
    from backend.db.engine import database_url, make_engine
    from backend.serving.artifacts import ArtifactError
    from backend.serving.registry import ModelRegistry, RegistryError

    async def main() -> T:
        engine = make_engine(database_url(), null_pool=True)
        try:
            return await work(ModelRegistry(engine))
        finally:
            await engine.dispose()

    try:
        return asyncio.run(main())
    except (RegistryError, ArtifactError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from None


def _print(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


@models_app.command("register")
def register_command(
    path: Annotated[Path, typer.Argument(help="model folder (config.json + safetensors) or adapter folder")],
    name: Annotated[str | None, typer.Option("--name", help="default: the manifest's name or the folder's")] = None,
    parent: Annotated[str | None, typer.Option("--parent", help="version it was trained from")] = None,
    base: Annotated[str | None, typer.Option("--base", help="an adapter's base version")] = None,
    engine: Annotated[str, typer.Option("--engine", help="local (muarl model-server) or vllm")] = "local",
    served_name: Annotated[str | None, typer.Option("--served-name", help="default: NAME-ID")] = None,
) -> None:
    """Register a model folder as a new immutable version; prints it as one JSON object."""
    if engine not in ("local", "vllm"):
        console.print("[red]error:[/red] --engine must be local or vllm")
        raise typer.Exit(2)
    version = _run(lambda reg: reg.register_folder(path, actor=actor(), name=name, parent=parent, base=base,
                                                   engine=engine, served_name=served_name))
    _print(version.to_json())


@models_app.command("list")
def list_command(as_json: Annotated[bool, typer.Option("--json", help="a JSON array")] = False) -> None:
    """Every version, oldest first, with its aliases."""
    versions = _run(lambda reg: reg.list_versions())
    if as_json:
        _print([v.to_json() for v in versions])
        return
    table = Table("id", "name", "kind", "engine", "served name", "aliases", "created")
    for v in versions:
        aliases = ", ".join(v.aliases) + (" (retired)" if v.retired else "")
        table.add_row(v.id, v.name, v.kind, v.engine, v.served_name, aliases, v.created_at.isoformat(" ", "seconds"))
    Console().print(table)


@models_app.command("show")
def show_command(version_id: Annotated[str, typer.Argument(help="version id")]) -> None:
    """One version with its files, gate reports and events (JSON)."""

    async def work(reg: Any) -> dict[str, Any]:
        version = await reg.require(version_id)
        return {**version.to_json(files=True),
                "gate_reports": [r.to_json() for r in await reg.gate_reports(version_id)],
                "events": [e.to_json() for e in await reg.events(version_id=version_id)]}

    _print(_run(work))


@models_app.command("promote")
def promote_command(
    version_id: Annotated[str, typer.Argument(help="version id")],
    reason: Reason,
    skip_gates: Annotated[bool, typer.Option("--skip-gates", help="promote without a passed gate report")] = False,
) -> None:
    """Make a version the champion (refused unless it passed its gates against the champion)."""
    from backend.config import get_settings
    from backend.serving.promotion import promote

    change = _run(lambda reg: promote(reg, version_id, reason=reason, actor=actor(), settings=get_settings(),
                                      skip_gates=skip_gates))
    console.print(f"{change.champion_after} is the champion (was {change.champion_before or 'none'})"
                  + (" [yellow]gates skipped[/yellow]" if change.event.details.get("skip_gates") else ""))
    _print({"champion": change.champion_after, "previous_champion": change.champion_before,
            "event": change.event.to_json()})


@models_app.command("rollback")
def rollback_command(reason: Reason) -> None:
    """Make the previous champion the champion again."""
    from backend.config import get_settings
    from backend.serving.promotion import rollback

    change = _run(lambda reg: rollback(reg, reason=reason, actor=actor(), settings=get_settings()))
    console.print(f"rolled back: {change.champion_after} is the champion again (was {change.champion_before})")
    _print({"champion": change.champion_after, "previous_champion": change.champion_before,
            "event": change.event.to_json()})


@models_app.command("retire")
def retire_command(version_id: Annotated[str, typer.Argument(help="version id")], reason: Reason) -> None:
    """Retire a version: it can no longer be promoted."""
    event = _run(lambda reg: reg.retire(version_id, actor=actor(), reason=reason))
    _print(event.to_json())
