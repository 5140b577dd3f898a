"""The `muarl` command line.

Backend commands live here (`db`, `store`, the service's `serve` / `mcp`, the registry's `models`); the
learning side adds its commands (`tau`, `tasks`, `eval`, ...) through the `muarl.cli`
entry-point group, so `backend/` never imports `rl/`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from backend.config import get_settings
from backend.logging import configure_logging

app = typer.Typer(help="muarl: customer-service agent with an online RL loop.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
store_app = typer.Typer(help="Load, export and generate stores.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(store_app, name="store")
console = Console(stderr=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


@app.callback()
def _root() -> None:
    configure_logging()


@db_app.command("upgrade")
def db_upgrade(revision: str = "head") -> None:
    """Apply alembic migrations to the store (DATABASE_URL or the embedded server)."""
    from backend.db.engine import database_url
    from backend.db.migrate import current_revision, upgrade_database

    url = database_url()
    asyncio.run(upgrade_database(url, revision))
    console.print(f"database at revision {asyncio.run(current_revision(url))}")


@db_app.command("prepare")
def db_prepare() -> None:
    """Migrate the store and, when it is empty, load the tau retail data (or a synthetic store)."""
    from backend.db.engine import database_url
    from backend.service_cli import prepare_store

    asyncio.run(prepare_store(database_url(), get_settings().benchmarks_dir))


@db_app.command("url")
def db_url() -> None:
    """Print the store's database URL (starting the embedded server if needed)."""
    from backend.db.engine import database_url

    print(database_url())


DataDir = Annotated[Path | None, typer.Option("--data-dir", help="benchmarks folder (default MUARL_BENCHMARKS_DIR)")]


@store_app.command("load-tau")
def store_load_tau(
    domain: Annotated[str, typer.Option(help="tau-bench domain")] = "retail",
    data_dir: DataDir = None,
    replace: Annotated[bool, typer.Option(help="replace a non-empty store")] = False,
) -> None:
    """Load tau-bench retail JSON (DIR/tau1/retail/{users,orders,products}.json) into the store."""
    if domain != "retail":
        raise fail(f"domain {domain!r} is not supported (only 'retail')", 2)
    from backend.store.service import load_tau_into_store

    try:
        counts = asyncio.run(load_tau_into_store(data_dir or get_settings().benchmarks_dir, replace=replace))
    except (FileNotFoundError, ValueError) as e:
        raise fail(str(e), 2) from None
    console.print(f"loaded {counts['users']} users, {counts['orders']} orders, {counts['products']} products")


@store_app.command("export")
def store_export(out: Annotated[Path, typer.Option("--out", help="output JSON file ('-' for stdout)")]) -> None:
    """Export the store in tau-bench's JSON shape ({"users", "orders", "products"})."""
    from backend.store.service import export_current_store

    data = asyncio.run(export_current_store())
    text = json.dumps(data, indent=2)
    if str(out) == "-":
        sys.stdout.write(text + "\n")
    else:
        out.write_text(text + "\n")
        console.print(f"wrote {out}")


@store_app.command("seed")
def store_seed(
    seed: Annotated[int, typer.Option(help="random seed (same seed and size: identical store)")] = 0,
    users: Annotated[int, typer.Option(min=1, help="number of customers")] = 500,
    replace: Annotated[bool, typer.Option(help="replace a non-empty store")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="write the JSON here instead of loading it")] = None,
) -> None:
    """Generate a synthetic store (orders in every status) and load it into the store."""
    from backend.store.seed import generate_store

    data = generate_store(seed, users)
    if out is not None:
        out.write_text(json.dumps(data, indent=2) + "\n")
        console.print(f"wrote {out}")
        return
    from backend.store.service import load_data_into_store

    try:
        counts = asyncio.run(load_data_into_store(data, replace=replace))
    except ValueError as e:
        raise fail(str(e), 2) from None
    console.print(f"seeded {counts['users']} users, {counts['orders']} orders, {counts['products']} products")


def _load_plugins() -> None:
    for ep in entry_points(group="muarl.cli"):
        try:
            ep.load()(app)
        except Exception as e:  # a broken plugin must not take the whole CLI down
            console.print(f"[yellow]warning:[/yellow] muarl plugin {ep.name!r} failed to load: {e}")


def _load_backend_commands() -> None:
    from backend import mcp_clients_cli, models_cli, service_cli, serving_cli

    service_cli.register(app)
    models_cli.register(app)
    serving_cli.register(app)
    mcp_clients_cli.register(app)


# the service's and the registry's commands run without the learning side (no rl/, no torch)
_SERVICE_COMMANDS = {"serve", "mcp", "run", "models", "serving", "mcp-clients"}


def main() -> None:
    _load_backend_commands()
    if not (len(sys.argv) > 1 and sys.argv[1] in _SERVICE_COMMANDS):
        _load_plugins()
    app()


if __name__ == "__main__":
    main()
