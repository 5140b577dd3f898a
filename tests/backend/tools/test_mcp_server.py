"""The store tools through the official MCP client: over streamable HTTP at `/mcp` on the API
(bearer token required) and over stdio (`muarl mcp --stdio`). MCP callers act as staff, so
they can read any customer; writes change the store and are audited."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.backend.api.serving import MCP_TOKEN, ApiServer, customer_with, db_rows, make_settings
from tests.fakes.openai_server import FakeOpenAIServer, Script

PROJECT = Path(__file__).resolve().parents[3]


@pytest.fixture
async def api(tau_db: str) -> AsyncIterator[ApiServer]:
    """The API (with /mcp) on a private copy of the tau store; the model is never asked."""
    with FakeOpenAIServer(Script([])) as llm:
        server = ApiServer(make_settings(tau_db, llm.url))
        await server.start()
        yield server
        await server.stop()


def _http_client(api: ApiServer, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    return Client(streamable_http_client(f"{api.url}/mcp", http_client=http), cache=None)


async def test_list_tools_with_schemas_and_annotations(api: ApiServer) -> None:
    async with _http_client(api, MCP_TOKEN) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert len(tools) == 16
    get_user = tools["get_user_details"]
    assert get_user.annotations.read_only_hint is True and get_user.annotations.destructive_hint is False
    cancel = tools["cancel_pending_order"]
    assert cancel.annotations.read_only_hint is False and cancel.annotations.destructive_hint is True
    assert cancel.input_schema["required"] == ["order_id", "reason"]
    items = tools["modify_pending_order_items"].input_schema["properties"]["item_ids"]
    assert items["type"] == "array" and items["items"] == {"type": "string"}
    assert tools["calculate"].annotations.read_only_hint is True


async def test_read_and_write_tools_act_as_staff_and_writes_are_audited(api: ApiServer, tau_retail,
                                                                         tau_db: str) -> None:
    user, order_id = customer_with(tau_retail, "pending")
    async with _http_client(api, MCP_TOKEN) as client:
        details = await client.call_tool("get_user_details", {"user_id": user["user_id"]})
        assert details.is_error is False
        assert json.loads(details.content[0].text)["email"] == user["email"]

        cancelled = await client.call_tool("cancel_pending_order",
                                           {"order_id": order_id, "reason": "ordered by mistake"})
        assert cancelled.is_error is False
        assert json.loads(cancelled.content[0].text)["status"] == "cancelled"

        again = await client.call_tool("cancel_pending_order", {"order_id": order_id, "reason": "ordered by mistake"})
        assert again.is_error is True
        assert again.content[0].text == "Error: non-pending order cannot be cancelled"

        missing = await client.call_tool("get_order_details", {})
        assert missing.is_error is True and missing.content[0].text.startswith("Error: missing required argument")

    row = (await db_rows(tau_db, "SELECT status FROM orders WHERE id = :o", o=order_id))[0]
    assert row["status"] == "cancelled"
    audit = await db_rows(tau_db, "SELECT event, actor, tool, arguments FROM audit_log ORDER BY id")
    assert audit == [{"event": "staff_tool_call", "actor": "mcp", "tool": "cancel_pending_order",
                      "arguments": {"order_id": order_id, "reason": "ordered by mistake"}}]


async def test_mcp_without_the_token_is_refused(api: ApiServer) -> None:
    async with httpx.AsyncClient(base_url=api.url) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {MCP_TOKEN}"}):
            r = await http.post("/mcp", json=body, headers=headers)
            assert r.status_code == 401, headers
            assert r.headers["content-type"] == "application/problem+json"
    with pytest.raises(Exception):  # noqa: B017  (the SDK reports the 401 in its own way)
        async with _http_client(api, "wrong-token") as client:
            await client.list_tools()


async def test_mcp_over_stdio(tau_db: str, tau_retail) -> None:
    user, _ = customer_with(tau_retail, "delivered")
    env = {**os.environ, "DATABASE_URL": tau_db, "MUARL_LOG_LEVEL": "WARNING"}
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "muarl"), args=["mcp", "--stdio"],
                                   env=env, cwd=str(PROJECT))
    async with Client(params, cache=None) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert len(names) == 16 and "find_user_id_by_email" in names
        found = await client.call_tool("find_user_id_by_email", {"email": user["email"].upper()})
        assert found.is_error is False and found.content[0].text == user["user_id"]
