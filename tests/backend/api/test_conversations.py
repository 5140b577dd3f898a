"""Customer conversations end to end over real HTTP: the agent, scripted through a fake
OpenAI-compatible server, cancels an order after the customer confirms, changes an address,
and everything it did is in the transcript and the database."""

from __future__ import annotations

import json

import httpx

from tests.backend.api.serving import ApiServer, customer_with, db_rows, start_chat
from tests.fakes.openai_server import FakeOpenAIServer, Script, text, tool_call


async def test_cancel_an_order_after_confirmation(client: httpx.AsyncClient, api: ApiServer, script: Script,
                                                  fake_llm: FakeOpenAIServer, tau_retail, tau_db: str) -> None:
    user, order_id = customer_with(tau_retail, "pending")
    script.extend([
        tool_call("find_user_id_by_email", {"email": user["email"]}),
        tool_call("get_order_details", {"order_id": order_id}),
        text(f"Order {order_id} is pending. Shall I cancel it because it is no longer needed? (yes/no)"),
        tool_call("cancel_pending_order", {"order_id": order_id, "reason": "no longer needed"}),
        text(f"Done: order {order_id} is cancelled."),
    ])
    chat = await start_chat(client)

    first = await chat.send(f"Hi, I'd like to cancel an order. My email is {user['email']}.")
    assert first["reply"].startswith(f"Order {order_id} is pending")
    assert [c["name"] for c in first["tool_calls"]] == ["find_user_id_by_email", "get_order_details"]
    assert all(c["outcome"] == "ok" for c in first["tool_calls"])
    assert first["notice"] is False and first["model"] == "fake-model"
    # nothing changed before the customer said yes
    assert (await db_rows(tau_db, "SELECT status FROM orders WHERE id = :o", o=order_id))[0]["status"] == "pending"

    second = await chat.send("yes")
    assert second["reply"] == f"Done: order {order_id} is cancelled."
    assert second["tool_calls"] == [{"name": "cancel_pending_order", "outcome": "ok"}]
    row = (await db_rows(tau_db, "SELECT status, cancel_reason FROM orders WHERE id = :o", o=order_id))[0]
    assert row == {"status": "cancelled", "cancel_reason": "no longer needed"}

    # the model saw the policy, the tools, and each tool result before its next step
    first_request = fake_llm.requests[0]
    assert first_request["messages"][0]["role"] == "system"
    assert "identify the customer" in first_request["messages"][0]["content"].lower()
    assert len(first_request["tools"]) == 16
    after_cancel = fake_llm.requests[4]["messages"][-1]
    assert after_cancel["role"] == "tool" and json.loads(after_cancel["content"])["status"] == "cancelled"
    assert script.remaining == 0

    transcript = await chat.transcript()
    roles = [m["role"] for m in transcript["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant",
                     "user", "assistant", "tool", "assistant"]
    assert [m["seq"] for m in transcript["messages"]] == list(range(1, 11))
    assert transcript["authenticated"] is True
    assert transcript["messages"][2]["content"] == user["user_id"]
    assert all(m["model"] == "fake-model" for m in transcript["messages"] if m["role"] == "assistant")

    calls = await db_rows(tau_db, "SELECT name, outcome, model, message_seq FROM conversation_tool_calls "
                                  "WHERE conversation_id = :c ORDER BY id", c=chat.id)
    assert [(c["name"], c["outcome"], c["message_seq"]) for c in calls] == [
        ("find_user_id_by_email", "ok", 2), ("get_order_details", "ok", 4), ("cancel_pending_order", "ok", 8)]
    bound = await db_rows(tau_db, "SELECT customer_user_id FROM conversations WHERE id = :c", c=chat.id)
    assert bound[0]["customer_user_id"] == user["user_id"]


async def test_change_the_default_address(client: httpx.AsyncClient, script: Script, tau_retail,
                                          tau_db: str) -> None:
    user, _ = customer_with(tau_retail, "pending", skip=1)
    new_address = {"address1": "1 Harbour Road", "address2": "Flat 2", "city": "Portland", "state": "OR",
                   "country": "USA", "zip": "97201"}
    script.extend([
        tool_call("find_user_id_by_name_zip", {"first_name": user["name"]["first_name"],
                                               "last_name": user["name"]["last_name"],
                                               "zip": user["address"]["zip"]}),
        text("I found your account. Please confirm the new address: 1 Harbour Road, Flat 2, Portland OR 97201?"),
        tool_call("modify_user_address", {"user_id": user["user_id"], **new_address}),
        text("Your default address is updated."),
    ])
    chat = await start_chat(client)
    await chat.send(f"I'm {user['name']['first_name']} {user['name']['last_name']}, zip {user['address']['zip']}; "
                    "I moved.")
    reply = await chat.send("Yes, that's right.")
    assert reply["reply"] == "Your default address is updated."
    assert reply["tool_calls"] == [{"name": "modify_user_address", "outcome": "ok"}]
    row = (await db_rows(tau_db, "SELECT address1, address2, city, state, country, zip FROM customers "
                                 "WHERE id = :u", u=user["user_id"]))[0]
    assert row == new_address


async def test_streaming_a_reply_as_server_sent_events(client: httpx.AsyncClient, script: Script,
                                                       tau_retail) -> None:
    user, _ = customer_with(tau_retail, "delivered")
    script.extend([tool_call("find_user_id_by_email", {"email": user["email"]}), text("Hello! How can I help?")])
    chat = await start_chat(client)
    events = []
    async with client.stream("POST", f"/v1/conversations/{chat.id}/messages/stream", headers=chat.auth,
                             json={"content": f"hi, I am {user['email']}"}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        name = None
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                events.append((name, json.loads(line[len("data: "):])))
    assert [e[0] for e in events] == ["tool_call", "tool_result", "reply", "done"]
    assert events[0][1]["tool_calls"][0]["name"] == "find_user_id_by_email"
    assert events[1][1] == {"id": events[0][1]["tool_calls"][0]["id"], "name": "find_user_id_by_email",
                            "outcome": "ok", "output": user["user_id"]}
    assert events[2][1]["reply"] == "Hello! How can I help?"
    # the streamed turn is persisted like any other
    roles = [m["role"] for m in (await chat.transcript())["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_openapi_health_readiness_and_metrics(client: httpx.AsyncClient, script: Script) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert "/v1/conversations" in spec["paths"] and "/v1/conversations/{conversation_id}/messages" in spec["paths"]
    assert (await client.get("/docs")).status_code == 200
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["model_configured"] is True
    script.extend([text("hello")])
    chat = await start_chat(client)
    await chat.send("hi")
    metrics = (await client.get("/metrics")).text
    assert 'muarl_http_requests_total{method="POST",route="/v1/conversations",status="201"}' in metrics
    assert 'muarl_llm_request_seconds_count{model="fake-model"}' in metrics
    assert "muarl_chat_turn_overhead_seconds_bucket" in metrics
