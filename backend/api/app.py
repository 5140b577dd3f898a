"""The API application factory: `create_app(settings)` builds the FastAPI app that serves
customer conversations (`/v1/conversations`), health and metrics, OpenAPI docs (`/docs`, with
Swagger UI's assets served by the app itself, so they work offline) and the MCP tool server
at `/mcp`.

Everything the app needs is built here once and kept on `app.state`: the store's engine
(`DATABASE_URL`, or the embedded server), the champion resolver (which model answers each turn:
the registry's champion, else the `MUARL_LLM_*` endpoint; with neither the app still starts and
chat answers 503), the chat service and the MCP server, whose session manager runs in the app's
lifespan. Ops routes (`/v1/ops/...`) manage the model registry.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from fastapi import FastAPI
from mcp.server.transport_security import TransportSecuritySettings
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from backend.api.chat import ChatService
from backend.api.cycle_progress import progress_hook
from backend.api.docs import install_docs
from backend.api.mcp_mount import BodyLimit, McpEndpoint
from backend.api.metrics import RequestMetrics
from backend.api.problems import install_problem_handlers, install_problem_schema
from backend.api.routes import conversations, health, ops_cycles, ops_escalations, ops_models
from backend.config import Settings, get_settings
from backend.db.engine import database_url, normalize_url
from backend.serving.champion import ChampionResolver, add_no_model_detail, remove_no_model_detail
from backend.tools.mcp_server import build_mcp_server
from backend.tools.registry import RETAIL, ToolRegistry

log = structlog.get_logger(__name__)


def retail_registry() -> ToolRegistry:
    """The retail registry with its tools registered."""
    import backend.tools.retail  # noqa: F401  (registers the 16 tools on RETAIL)

    return RETAIL


def api_engine(url: str, settings: Settings) -> AsyncEngine:
    """The API's pool. With `api_async_transcript_commit`, sessions default to asynchronous commit:
    transcript rows are visible at once and survive service restarts, and only a crash of the
    database server itself could lose the last fraction of a second of them; every transaction
    that changes the store switches back to synchronous commit (see `ChatService`, MCP server)."""
    server_settings = {"synchronous_commit": "off"} if settings.api_async_transcript_commit else {}
    return create_async_engine(normalize_url(url), pool_size=settings.api_db_pool_size,
                               max_overflow=settings.api_db_pool_size,
                               connect_args={"server_settings": server_settings})


def quiet_libraries() -> None:
    """HTTP clients log every request at INFO: one line per model call is noise (and CPU) here."""
    for name in ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "mcp"):
        logging.getLogger(name).setLevel(logging.WARNING)


def create_app(settings: Settings | None = None, *, db_url: str | None = None) -> FastAPI:
    settings = settings or get_settings()
    quiet_libraries()
    url = db_url or database_url(settings)
    engine = api_engine(url, settings)
    registry = retail_registry()
    resolver = ChampionResolver(engine, settings)
    chat = ChatService(engine, settings, resolver, registry)
    progress = progress_hook(engine)
    mcp = build_mcp_server(engine.connect, registry)
    mcp_app = mcp.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True,
        # the bearer token guards /mcp; the Host-header check would refuse non-loopback deployments
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            await resolver.start()
            add_no_model_detail(progress)  # chat's 503 tells how far the training cycle is
            # everything built so far lives as long as the process: keep the garbage collector
            # from walking it again and again (long gen-2 pauses show up as p99 latency)
            gc.collect()
            gc.freeze()
            log.info("api.started", external_model=settings.llm_model, listening=resolver.listening,
                     mcp=bool(settings.mcp_token))
            yield
        remove_no_model_detail(progress)
        await resolver.close()
        await engine.dispose()

    app = FastAPI(
        title="muarl customer service",
        version="0.1.0",
        description="Customers chat with the store's agent; engineers and agents reach the store tools over MCP "
                    "at /mcp (Bearer token of a client added with `muarl mcp-clients add NAME`). Every error is "
                    "problem JSON (application/problem+json).",
        lifespan=lifespan, docs_url=None, redoc_url=None,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.resolver = resolver
    app.state.chat = chat
    app.state.mcp = mcp
    app.include_router(conversations.router)
    app.include_router(health.router)
    app.include_router(ops_cycles.router)
    app.include_router(ops_escalations.router)
    app.include_router(ops_models.router)
    install_docs(app)
    install_problem_handlers(app)
    install_problem_schema(app)
    # outermost last: metrics see everything, then the body limit, then /mcp
    app.add_middleware(McpEndpoint, mcp_app=mcp_app, token=settings.mcp_token, engine=engine)
    app.add_middleware(BodyLimit, max_bytes=settings.api_max_body_bytes)
    app.add_middleware(RequestMetrics)
    return app
