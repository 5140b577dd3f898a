"""The escalation queue over real HTTP on a real store: a conversation that ends with a transfer
to a human enters the queue (with the customer's records as they were), ops see it with its
transcript, fix the problem with a staff tool over MCP, see that write as the escalation's staff
action (and not a write on another customer), resolve it; wrong moves are 409, unknown ids 404,
no ops token 401, a wrong one 403."""

from __future__ import annotations

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.backend.api.serving import MCP_TOKEN, ApiServer, customer_with, db_rows, start_chat
from tests.fakes.openai_server import Script, text, tool_call

OPS = {"Authorization": "Bearer ops-test-token"}


async def _staff_cancel(api: ApiServer, order_id: str) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {MCP_TOKEN}"}, timeout=30)
    async with Client(streamable_http_client(f"{api.url}/mcp", http_client=http), cache=None) as mcp:
        result = await mcp.call_tool("cancel_pending_order", {"order_id": order_id, "reason": "ordered by mistake"})
        assert result.is_error is False, result.content


async def test_transferred_conversation_is_queued_resolved_and_shows_the_staff_writes(
        api: ApiServer, client: httpx.AsyncClient, script: Script, tau_retail, tau_db: str) -> None:
    user, order_id = customer_with(tau_retail, "pending")
    other, other_order = customer_with(tau_retail, "pending", skip=1)
    script.extend([
        tool_call("find_user_id_by_email", {"email": user["email"]}),
        text("Thanks, you are identified. What can I do?"),
        tool_call("transfer_to_human_agents", {"summary": f"wants order {order_id} cancelled, unsure of policy"}),
    ])
    chat = await start_chat(client)
    await chat.send(f"Hi, my email is {user['email']}.")
    reply = await chat.send(f"Please cancel order {order_id}, I ordered it by mistake.")
    assert reply["status"] == "transferred"

    assert (await client.get("/v1/ops/escalations")).status_code == 401
    assert (await client.get("/v1/ops/escalations", headers={"Authorization": "Bearer nope"})).status_code == 403
    page = (await client.get("/v1/ops/escalations", headers=OPS)).json()
    assert [e["conversation_id"] for e in page["items"]] == [chat.id]
    esc = page["items"][0]
    assert esc["state"] == "open" and esc["customer_user_id"] == user["user_id"]
    assert esc["summary"] == f"wants order {order_id} cancelled, unsure of policy"
    before = (await db_rows(tau_db, "SELECT store_before FROM escalations"))[0]["store_before"]
    assert before["orders"][order_id]["status"] == "pending"

    await _staff_cancel(api, order_id)
    await _staff_cancel(api, other_order)  # another customer's order: not this escalation's action
    detail = (await client.get(f"/v1/ops/escalations/{esc['id']}", headers=OPS)).json()
    said = [m["content"] for m in detail["transcript"] if m["role"] == "user"]
    assert said == [f"Hi, my email is {user['email']}.", f"Please cancel order {order_id}, I ordered it by mistake."]
    assert [(a["tool"], a["arguments"]) for a in detail["staff_actions"]] == [
        ("cancel_pending_order", {"order_id": order_id, "reason": "ordered by mistake"})]

    resolved = await client.post(f"/v1/ops/escalations/{esc['id']}/resolve", headers=OPS | {"X-Ops-Actor": "alice"},
                                 json={"note": "cancelled it for them"})
    assert resolved.status_code == 200, resolved.text
    body = resolved.json()
    assert body["state"] == "resolved" and body["resolved_by"] == "ops:alice" and body["resolved_at"]
    assert body["note"] == "cancelled it for them"
    assert len(body["staff_actions"]) == 1

    again = await client.post(f"/v1/ops/escalations/{esc['id']}/resolve", headers=OPS, json={})
    assert again.status_code == 409 and "resolved" in again.json()["detail"]
    assert (await client.get("/v1/ops/escalations?state=open", headers=OPS)).json()["items"] == []
    assert len((await client.get("/v1/ops/escalations?state=resolved", headers=OPS)).json()["items"]) == 1
    dismissed = await client.post(f"/v1/ops/escalations/{esc['id']}/dismiss", headers=OPS, json={"note": "dup"})
    assert dismissed.status_code == 200 and dismissed.json()["state"] == "dismissed"
    final = await client.post(f"/v1/ops/escalations/{esc['id']}/resolve", headers=OPS, json={})
    assert final.status_code == 409


async def test_bad_requests_are_clear(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/ops/escalations/999", headers=OPS)).status_code == 404
    assert (await client.post("/v1/ops/escalations/999/resolve", headers=OPS, json={})).status_code == 404
    assert (await client.get("/v1/ops/escalations/abc", headers=OPS)).status_code == 422
    assert (await client.get("/v1/ops/escalations?state=weird", headers=OPS)).status_code == 422
    bad = await client.post("/v1/ops/escalations/1/resolve", headers=OPS, json={"nope": 1})
    assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
    assert (await client.post("/v1/ops/escalations/1/dismiss", json={})).status_code == 401
