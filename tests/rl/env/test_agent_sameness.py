"""The agent that trains is the agent that serves: one scripted model reply sequence, played once
through the chat API (the real app over HTTP, on a real Postgres copy of the tau store) and once as
an episode (the episode runner on a sandbox of the same store, a scripted customer), makes the same
tool calls, gets the same tool results, shows the model the same conversation and leaves the same
store. The script exercises the agent step's rules: a step with two calls (one is kept), a call with
malformed arguments (answered with an error), a write, text answers."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy import text as text_sql
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.engine import make_engine
from backend.store.records import fetch_orders, fetch_products, fetch_users, plain_numbers
from rl.env import GoldStateCache
from rl.env.episode import run_episode
from rl.policies.openai_policy import OpenAIPolicy
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks
from tests.backend.api.serving import api, client, fake_llm, script, settings_overrides, start_chat  # noqa: F401
from tests.fakes.openai_server import FakeOpenAIServer, Script, Step, text, tool_call


def model_replies(task) -> list[Step]:
    c, g = task.customer, task.script.goals[0]
    ident = ("find_user_id_by_email", {"email": c.email}) if c.identify_by == "email" else (
        "find_user_id_by_name_zip", {"first_name": c.first_name, "last_name": c.last_name, "zip": c.zip})
    two_calls = Step(tool_calls=[
        {"id": "call_order", "type": "function",
         "function": {"name": "get_order_details", "arguments": json.dumps({"order_id": g.order_id})}},
        {"id": "call_never", "type": "function",  # a second call in one step: not run
         "function": {"name": "cancel_pending_order", "arguments": json.dumps(g.action.arguments)}}])
    return [
        text("Sure. Could you give me your email, or your name and zip code?"),
        tool_call(*ident, call_id="call_ident"),
        two_calls,
        tool_call("get_order_details", '{"order_id": ', call_id="call_bad"),  # malformed arguments
        text(f"I can cancel order {g.order_id} with the reason '{g.action.arguments['reason']}'. "
             "Confirm (yes/no)?"),
        tool_call("cancel_pending_order", g.action.arguments, call_id="call_cancel"),
        text(f"Order {g.order_id} is cancelled."),
    ]


async def store_state(conn: AsyncConnection) -> dict[str, Any]:
    return plain_numbers({"users": await fetch_users(conn), "orders": await fetch_orders(conn),
                          "products": await fetch_products(conn)})


async def test_chat_and_episode_are_the_same_agent(tau_retail, retail_pool, tau_db, api,  # noqa: F811
                                                   client: httpx.AsyncClient, script: Script,  # noqa: F811
                                                   fake_llm: FakeOpenAIServer) -> None:  # noqa: F811
    task = generate_tasks(tau_retail, 1, seed=5, snapshot="tau-retail", categories=["cancel"])[0]
    order_id = task.script.goals[0].order_id

    # as an episode: the policy is the same OpenAI-compatible model, on a sandbox of the store
    episode_script = Script(model_replies(task))
    with FakeOpenAIServer(episode_script) as episode_llm:
        policy = OpenAIPolicy("fake-model", base_url=episode_llm.url, max_retries=0, max_tokens=None)
        async with retail_pool.sandbox() as sb:
            traj = await run_episode(task, policy, ScriptedCustomer(), sb, cache=GoldStateCache(), keep_changes=True)
            episode_store = await store_state(sb.conn)
        episode_requests = episode_llm.requests
    assert traj.excluded is None and traj.reward == 1.0, (traj.excluded, traj.error, traj.breakdown)
    assert episode_script.remaining == 0

    # through the chat API: the customer says what the scripted customer said in the episode
    script.extend(model_replies(task))
    said = [m["content"] for m in traj.messages if m["role"] == "user"]
    assert said[-1].endswith("###STOP###")
    chat = await start_chat(client)
    for message in said[:-1]:
        await chat.send(message)
    assert script.remaining == 0
    engine = make_engine(tau_db, null_pool=True)
    try:
        async with engine.connect() as conn:
            chat_store = await store_state(conn)
            rows = (await conn.execute(text_sql(
                "SELECT name, arguments, output FROM conversation_tool_calls WHERE conversation_id = :cid "
                "ORDER BY id"), {"cid": chat.id})).all()
    finally:
        await engine.dispose()

    # the same tool calls, with the same results
    chat_calls = [(r[0], r[1], r[2]) for r in rows]
    episode_calls = [(c.name, c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments), c.output)
                     for c in traj.tool_calls]
    assert [(n, json.loads(a) if a.startswith("{") and a.endswith("}") else a, o) for n, a, o in chat_calls] == [
        (n, json.loads(a) if a.startswith("{") and a.endswith("}") else a, o) for n, a, o in episode_calls]
    assert [n for n, _, _ in chat_calls] == ["find_user_id_by_email" if task.customer.identify_by == "email"
                                             else "find_user_id_by_name_zip", "get_order_details",
                                             "get_order_details", "cancel_pending_order"]
    assert chat_calls[2][2].startswith("Error") and chat_calls[3][2] == episode_calls[3][2]
    # the model was shown the same conversation, step by step
    assert len(fake_llm.requests) == len(episode_requests) == len(model_replies(task))
    for served, played in zip(fake_llm.requests, episode_requests, strict=True):
        assert served["messages"] == played["messages"]
        assert served["tools"] == played["tools"]
    # and the store ends the same: the order is cancelled in both, nothing else differs
    assert chat_store["orders"][order_id]["status"] == "cancelled"
    assert chat_store["orders"][order_id] != plain_numbers(tau_retail["orders"][order_id])
    assert chat_store == episode_store
