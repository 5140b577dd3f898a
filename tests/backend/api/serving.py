"""Fixtures and helpers for the API tests (and the MCP tests): the real app served by uvicorn
on a loopback port, on a private copy of the tau retail store, talking to a fake OpenAI-compatible server that replays a
script; plus helpers to pick customers out of the tau data and to read the database."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy import text

from backend.api.app import create_app
from backend.config import Settings
from backend.db.engine import make_engine
from tests.fakes.openai_server import FakeOpenAIServer, Script

MCP_TOKEN = "mcp-test-token"


class ApiServer:
    """`create_app(settings)` under uvicorn in the test's event loop; `restart()` builds a new app."""

    def __init__(self, settings: Settings, host: str = "127.0.0.1") -> None:
        self.settings = settings
        self.host = host  # where it listens ("0.0.0.0": every interface; `url` stays on loopback)
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[Any] | None = None
        self.port = 0
        self.app = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> ApiServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self.app = create_app(self.settings)
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="on")
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        for _ in range(500):
            if self._server.started:
                return self
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        raise RuntimeError("API server did not start")

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await asyncio.wait_for(self._task, 15)
        self._server = self._task = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


def make_settings(db_url: str, llm_url: str | None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "DATABASE_URL": db_url,
        "MUARL_LLM_BASE_URL": llm_url,
        "MUARL_LLM_MODEL": "fake-model" if llm_url else None,
        "MUARL_LLM_API_KEY": "test-key",
        "MUARL_LLM_TIMEOUT_S": 2.0,
        "MUARL_LLM_MAX_RETRIES": 1,
        "MUARL_LLM_RETRY_BACKOFF_S": 0.01,
        "MUARL_MCP_TOKEN": MCP_TOKEN,
        "MUARL_OPS_TOKEN": "ops-test-token",
        "MUARL_API_DB_POOL_SIZE": 5,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def script() -> Script:
    return Script([])


@pytest.fixture
def fake_llm(script: Script) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(script) as server:
        yield server


@pytest.fixture
def settings_overrides() -> dict[str, Any]:
    """Override in a test module (or parametrize) to change the app's settings."""
    return {}


@pytest.fixture
async def api(tau_db: str, fake_llm: FakeOpenAIServer, settings_overrides: dict[str, Any]) -> AsyncIterator[ApiServer]:
    server = ApiServer(make_settings(tau_db, fake_llm.url, **settings_overrides))
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def client(api: ApiServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.url, timeout=30) as c:
        yield c


@dataclass
class Chat:
    """One customer's conversation over HTTP."""

    client: httpx.AsyncClient
    id: str
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def send(self, content: str, *, expect: int = 200) -> dict[str, Any]:
        r = await self.client.post(f"/v1/conversations/{self.id}/messages", json={"content": content},
                                   headers=self.auth)
        assert r.status_code == expect, r.text
        return r.json()

    async def transcript(self) -> dict[str, Any]:
        r = await self.client.get(f"/v1/conversations/{self.id}", headers=self.auth)
        assert r.status_code == 200, r.text
        return r.json()


async def start_chat(client: httpx.AsyncClient) -> Chat:
    r = await client.post("/v1/conversations")
    assert r.status_code == 201, r.text
    body = r.json()
    return Chat(client, body["id"], body["token"])


def customer_with(tau_retail: dict[str, Any], status: str, *, skip: int = 0) -> tuple[dict[str, Any], str]:
    """A tau customer with an order in `status` (and that order's id)."""
    found = 0
    for user in tau_retail["users"].values():
        for order_id in user["orders"]:
            if tau_retail["orders"][order_id]["status"] == status:
                if found == skip:
                    return {**user, "user_id": _user_id(tau_retail, user)}, order_id
                found += 1
                break
    raise LookupError(status)


def _user_id(tau_retail: dict[str, Any], user: dict[str, Any]) -> str:
    return next(uid for uid, u in tau_retail["users"].items() if u is user)


async def db_rows(db_url: str, sql: str, **params: Any) -> list[dict[str, Any]]:
    engine = make_engine(db_url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return [dict(r) for r in (await conn.execute(text(sql), params)).mappings().all()]
    finally:
        await engine.dispose()
