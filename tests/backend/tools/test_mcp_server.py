"""The store tools through the official MCP client: over streamable HTTP at `/mcp` on the API
(a registered client's bearer token, or MUARL_MCP_TOKEN) and over stdio (`muarl mcp --stdio`).
MCP callers act as staff, so they can read any customer; reads of customer records, writes and
refused writes are audited under the caller's identity (`mcp:<client>`)."""

from __future__ import annotations

import json
import os
import subprocess
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


def mcp_clients_cli(db_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`muarl mcp-clients ...` on the test's store, as an operator would run it."""
    env = {**os.environ, "DATABASE_URL": db_url, "MUARL_LOG_LEVEL": "WARNING", "PYTHONPATH": str(PROJECT)}
    return subprocess.run([str(Path(sys.executable).parent / "muarl"), "mcp-clients", *args], env=env,
                          cwd=str(PROJECT), capture_output=True, text=True, timeout=60)


async def test_reads_writes_and_refusals_are_audited_under_the_clients_name(api: ApiServer, tau_retail,
                                                                           tau_db: str) -> None:
    user, order_id = customer_with(tau_retail, "pending")
    added = mcp_clients_cli(tau_db, "add", "alice")
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    async with _http_client(api, token) as client:
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

        products = await client.call_tool("list_all_product_types", {})  # no customer data: not audited
        assert products.is_error is False
    async with _http_client(api, MCP_TOKEN) as client:  # the operator's token has an identity of its own
        assert (await client.call_tool("get_order_details", {"order_id": order_id})).is_error is False

    row = (await db_rows(tau_db, "SELECT status FROM orders WHERE id = :o", o=order_id))[0]
    assert row["status"] == "cancelled"
    audit = await db_rows(tau_db, "SELECT event, actor, tool, arguments, reason FROM audit_log ORDER BY id")
    cancel_args = {"order_id": order_id, "reason": "ordered by mistake"}
    assert audit == [
        {"event": "staff_read", "actor": "mcp:alice", "tool": "get_user_details",
         "arguments": {"user_id": user["user_id"]}, "reason": ""},
        {"event": "staff_tool_call", "actor": "mcp:alice", "tool": "cancel_pending_order",
         "arguments": cancel_args, "reason": ""},
        {"event": "staff_write_refused", "actor": "mcp:alice", "tool": "cancel_pending_order",
         "arguments": cancel_args, "reason": "Error: non-pending order cannot be cancelled"},
        {"event": "staff_read", "actor": "mcp:alice", "tool": "get_order_details", "arguments": {},
         "reason": missing.content[0].text},
        {"event": "staff_read", "actor": "mcp:env", "tool": "get_order_details",
         "arguments": {"order_id": order_id}, "reason": ""},
    ]


async def test_mcp_clients_are_added_listed_and_revoked(api: ApiServer, tau_db: str) -> None:
    first = mcp_clients_cli(tau_db, "add", "bob")
    assert first.returncode == 0, first.stderr
    token = first.stdout.strip()
    assert len(token) >= 32
    stored = await db_rows(tau_db, "SELECT name, token_hash FROM mcp_clients")
    assert stored[0]["name"] == "bob" and token not in stored[0]["token_hash"]  # only the hash is kept
    twice = mcp_clients_cli(tau_db, "add", "bob")
    assert twice.returncode != 0 and "exists" in twice.stderr
    assert mcp_clients_cli(tau_db, "add", "Not A Name").returncode != 0

    async with _http_client(api, token) as client:
        assert len((await client.list_tools()).tools) == 16

    listed = mcp_clients_cli(tau_db, "list")
    assert listed.returncode == 0 and listed.stdout.startswith("bob\t") and "active" in listed.stdout
    assert mcp_clients_cli(tau_db, "revoke", "bob").returncode == 0
    assert "revoked" in mcp_clients_cli(tau_db, "list").stdout
    assert mcp_clients_cli(tau_db, "revoke", "bob").returncode == 1

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient(base_url=api.url) as http:
        r = await http.post("/mcp", json=body, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"

    again = mcp_clients_cli(tau_db, "add", "bob")  # a revoked name can be given a new token
    assert again.returncode == 0 and again.stdout.strip() != token
    async with _http_client(api, again.stdout.strip()) as client:
        assert len((await client.list_tools()).tools) == 16


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
    env = {**os.environ, "DATABASE_URL": tau_db, "MUARL_LOG_LEVEL": "WARNING", "PYTHONPATH": str(PROJECT)}
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "muarl"), args=["mcp", "--stdio"],
                                   env=env, cwd=str(PROJECT))
    async with Client(params, cache=None) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert len(names) == 16 and "find_user_id_by_email" in names
        found = await client.call_tool("find_user_id_by_email", {"email": user["email"].upper()})
        assert found.is_error is False and found.content[0].text == user["user_id"]
