"""CLI commands of the agent service: `muarl serve` (the API), `muarl mcp --stdio` (the store
tools over MCP on stdin/stdout) and `muarl run` (what `make run` calls: migrate, fill an
empty store with the tau retail data or a synthetic one, then serve and say where everything
is). None of them imports torch or `rl/`."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from backend.serving.registry import Version

console = Console(stderr=True, soft_wrap=True)

Host = Annotated[str, typer.Option("--host", help="address to listen on")]
Port = Annotated[int, typer.Option("--port", min=1, max=65535, help="port to listen on")]
Workers = Annotated[int, typer.Option("--workers", min=1, max=64, help="server processes")]


def register(app: typer.Typer) -> None:
    """Add the service's commands to the `muarl` app."""
    app.command("serve")(serve)
    app.command("mcp")(mcp)
    app.command("run")(run)


def serve(host: Host = "127.0.0.1", port: Port = 8000, workers: Workers = 1) -> None:
    """Start the API (chat, MCP at /mcp, docs at /docs) on DATABASE_URL or the embedded store."""
    _serve(host, port, workers=workers)


def mcp(
    stdio: Annotated[bool, typer.Option("--stdio", help="speak MCP on stdin/stdout")] = False,
    database_url: Annotated[str | None, typer.Option("--database-url",
                                                     help="store to act on (default DATABASE_URL)")] = None,
) -> None:
    """Serve the store tools over MCP on stdio, acting as staff on the live store (or the given one)."""
    if not stdio:
        console.print("[red]error:[/red] pass --stdio (over HTTP, MCP is served by `muarl serve` at /mcp)")
        raise typer.Exit(2)
    import anyio

    from backend.api.app import retail_registry
    from backend.db.engine import database_url as resolve_url
    from backend.db.engine import make_engine
    from backend.tools.mcp_server import build_mcp_server

    engine = make_engine(database_url or resolve_url(), pool_size=2, max_overflow=4)
    server = build_mcp_server(engine.connect, retail_registry(), actor="mcp-stdio")

    async def main() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await engine.dispose()

    anyio.run(main)


def local_ops_token(var_dir: Path) -> Path:
    """The file holding this installation's ops token when MUARL_OPS_TOKEN is unset: made once (owner
    read/write only) and kept under var/, so a second `make run` signs ops in with the same token. Its
    path is printed, never the token (it would end up in terminal logs)."""
    path = var_dir / "ops-token"
    if not path.exists():
        var_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
    return path


def run(host: Host = "127.0.0.1", port: Port = 8000,
        model_server_port: Annotated[int, typer.Option("--model-server-port", min=1, max=65535,
                                                       help="port of the local model server")] = 8001,
        services: Annotated[str | None, typer.Option(
            "--services", help="comma-separated subset of api,worker,beat,model-server "
                               "(default MUARL_RUN_SERVICES: all)")] = None) -> None:
    """The whole product: migrate and fill the store if empty, then supervise the API, a Celery
    worker and beat, and the local model server (embedded Postgres and Redis unless DATABASE_URL /
    REDIS_URL are set). Ctrl-C stops every process it started."""
    try:
        _run(host, port, model_server_port, services)
    except KeyboardInterrupt:  # Ctrl-C while preparing: the embedded Postgres stops at exit
        console.print("stopped")
        raise typer.Exit(130) from None


def _run(host: str, port: int, model_server_port: int, services: str | None) -> None:
    import logging

    from backend.config import get_settings
    from backend.db.engine import database_url
    from backend.runner.services import Plan, build_services
    from backend.runner.supervisor import Supervisor

    logging.getLogger("alembic").setLevel(logging.WARNING)
    settings = get_settings()
    chosen = tuple(x.strip() for x in (services or settings.run_services).split(",") if x.strip())
    with console.status("starting the database"):
        url = database_url(settings)
    where = "DATABASE_URL" if settings.database_url else f"embedded PostgreSQL under {settings.var_dir}"
    console.print(f"store    {where}")
    asyncio.run(prepare_store(url, settings.benchmarks_dir))
    extra_env: dict[str, str] = {}
    if not settings.mcp_token:
        token = secrets.token_urlsafe(24)
        extra_env["MUARL_MCP_TOKEN"] = token
        console.print(f"MUARL_MCP_TOKEN was not set; this run's MCP token: [bold]{token}[/bold]")
    ops_token_note = "MUARL_OPS_TOKEN"
    if not settings.ops_token:
        token_file = local_ops_token(Path(settings.var_dir))
        extra_env["MUARL_OPS_TOKEN"] = token_file.read_text().strip()
        ops_token_note = f"token in {token_file}"
    champion, active = asyncio.run(_serving_state(url))
    external = bool(settings.llm_base_url and settings.llm_model)
    plan = Plan(database_url=url, redis_url=settings.redis_url, var_dir=Path(settings.var_dir).resolve(),
                host=host, port=port, model_server_port=model_server_port, services=chosen,
                first_cycle=champion is None and active is None and not external,
                debug=settings.log_level.upper() == "DEBUG")
    try:
        supervised = build_services(plan, extra_env)
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    broker = "REDIS_URL" if settings.redis_url else f"embedded Redis under {plan.var_dir / 'redis'}"
    console.print(f"broker   {broker}")
    base = f"http://{host}:{port}"
    console.print(f"API      {base}/v1/conversations   docs {base}/docs")
    console.print(f"web      {base}/  (customer chat)   {base}/ops  (ops console, {ops_token_note})")
    console.print(f"MCP      {base}/mcp  (Authorization: Bearer $MUARL_MCP_TOKEN, or a client's own token: "
                  "muarl mcp-clients add NAME)")
    console.print(f"health   {base}/healthz, {base}/readyz, metrics {base}/metrics")
    if champion is not None:
        console.print(f"model    champion {champion.id} ({champion.served_name}, {champion.engine} engine); "
                      "promotions and rollbacks apply from the next message")
    elif settings.llm_base_url and settings.llm_model:
        console.print(f"model    {settings.llm_model} at {settings.llm_base_url} (no champion in the registry)")
    elif active is not None:
        console.print(f"model    [yellow]no champion yet[/yellow]: cycle {active} resumes; chat answers 503 with its "
                      "progress until its model passes the gate")
    else:
        console.print("model    [yellow]no champion yet[/yellow]: the first cycle starts now; chat answers 503 with "
                      "its progress until its model passes the gate")
    console.print(f"starting {', '.join(s.name for s in supervised)} (Ctrl-C stops them all)")
    Supervisor(supervised, out=sys.stdout).run()
    console.print("stopped")


async def _serving_state(url: str) -> tuple[Version | None, str | None]:
    """The champion and the active cycle's id (None when there is none)."""
    from backend.cycles import active_cycle
    from backend.db.engine import make_engine
    from backend.serving.registry import ModelRegistry

    engine = make_engine(url, null_pool=True)
    try:
        champion = await ModelRegistry(engine).champion()
        active = await active_cycle(engine)
    finally:
        await engine.dispose()
    return champion, active.id if active else None


async def prepare_store(url: str, benchmarks_dir: Path) -> None:
    from backend.db.engine import make_engine
    from backend.db.migrate import upgrade_database
    from backend.store.tau_data import store_is_empty

    await upgrade_database(url)
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            empty = await store_is_empty(conn)
    finally:
        await engine.dispose()
    if not empty:
        console.print("store    already has data")
        return
    from backend.store.service import load_data_into_store

    if (benchmarks_dir / "tau1" / "retail" / "users.json").is_file():
        from backend.store.tau_data import read_tau_retail

        data = read_tau_retail(benchmarks_dir)
        source = f"tau-bench retail data from {benchmarks_dir}"
    else:
        try:
            from backend.store.seed import generate_store
        except ImportError:
            console.print(f"[yellow]store is empty[/yellow]: no tau data under {benchmarks_dir} and no generator")
            return
        data = generate_store(0, 500)
        source = "a synthetic store (seed 0, 500 customers)"
    with console.status(f"loading {source}"):
        counts = await load_data_into_store(data, url=url)
    console.print(f"store    loaded {source}: {counts['users']} customers, {counts['orders']} orders, "
                  f"{counts['products']} products")


def _serve(host: str, port: int, db_url: str | None = None, workers: int = 1) -> None:
    import uvicorn

    from backend.api.app import create_app

    if workers > 1:  # each process builds its own app; they share the database (and its turn leases)
        from backend.db.engine import database_url

        os.environ["DATABASE_URL"] = db_url or database_url()
        uvicorn.run("backend.api.app:create_app", factory=True, host=host, port=port, workers=workers,
                    log_level="warning", access_log=False)
        return

    class Server(uvicorn.Server):
        """Ctrl-C / SIGTERM end the service gracefully, without re-raising the signal afterwards
        (which would print a traceback from an already finished shutdown)."""

        def handle_exit(self, sig, frame) -> None:  # type: ignore[no-untyped-def]
            if self.should_exit:  # a second signal: stop waiting for open connections
                self.force_exit = True
            self.should_exit = True

    app = create_app(db_url=db_url)
    server = Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False))
    server.run()
    console.print("stopped")
