"""The OpenAI-compatible policy against a fake endpoint: what it sends, endpoint failures as excluded
causes, and a full episode on a real sandbox."""

from __future__ import annotations

import pytest

from backend.agent.llm import LLMUnavailable
from rl.env import GoldStateCache
from rl.env.episode import run_episode
from rl.policies.base import register_policy
from rl.policies.openai_policy import OpenAIPolicy
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks
from tests.fakes.openai_server import FakeOpenAIServer, Script, error, text, tool_call

TOOLS = [{"type": "function", "function": {"name": "think", "description": "d", "parameters": {"type": "object"}}}]


@pytest.fixture
def server():
    script = Script([])
    with FakeOpenAIServer(script) as srv:
        srv.script = script
        yield srv


async def test_sends_messages_and_tools_and_returns_tool_calls(server):
    server.script.extend([tool_call("think", {"thought": "x"}, call_id="call_1"), text("Hello!")])
    policy = OpenAIPolicy("agent-model", base_url=server.url, max_retries=0)
    session = policy.session(None, seed=5)
    turn = await session.complete([{"role": "system", "content": "p"}, {"role": "user", "content": "hi"}], TOOLS)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("think", '{"thought": "x"}')]
    body = server.requests[-1]
    assert body["model"] == "agent-model" and body["tools"] == TOOLS and body["messages"][1]["content"] == "hi"
    assert body["seed"] == 5 and body["temperature"] == 0.0 and body["max_tokens"] == 1024
    turn = await session.complete([{"role": "user", "content": "hi"}], TOOLS)
    assert (turn.content, turn.tool_calls, turn.model) == ("Hello!", [], "agent-model")


async def test_endpoint_failures_have_the_one_error_taxonomy(server):
    server.script.extend([error(500), error(502), error(400)])
    with pytest.raises(LLMUnavailable) as e:
        await OpenAIPolicy("m", base_url=server.url, max_retries=1).session(None, 0).complete([], TOOLS)
    assert e.value.kind == "server_error" and len(server.requests) == 2
    with pytest.raises(LLMUnavailable) as e:
        await OpenAIPolicy("m", base_url=server.url, max_retries=3).session(None, 0).complete([], TOOLS)
    assert e.value.kind == "rejected"


async def test_an_unavailable_endpoint_excludes_the_episode(server, tau_retail, retail_pool):
    task = generate_tasks(tau_retail, 1, seed=5, snapshot="tau-retail", categories=["cancel"])[0]
    server.script.extend([error(503), error(503)])
    async with retail_pool.sandbox() as sb:
        traj = await run_episode(task, OpenAIPolicy("m", base_url=server.url, max_retries=1), ScriptedCustomer(), sb,
                                 cache=GoldStateCache())
    assert (traj.excluded, traj.reward, traj.ended_by) == ("policy_server_error", None, "error")


async def test_full_episode_with_a_model_on_a_real_sandbox(server, tau_retail, retail_pool):
    task = generate_tasks(tau_retail, 1, seed=5, snapshot="tau-retail", categories=["cancel"])[0]
    c, g = task.customer, task.script.goals[0]
    ident = ("find_user_id_by_email", {"email": c.email}) if c.identify_by == "email" else (
        "find_user_id_by_name_zip", {"first_name": c.first_name, "last_name": c.last_name, "zip": c.zip})
    server.script.extend([
        text("Sure. Could you give me your email, or your name and zip code?"),
        tool_call(*ident),
        tool_call("get_order_details", {"order_id": g.order_id}),
        text(f"I can cancel order {g.order_id} with the reason '{g.action.arguments['reason']}'. Confirm (yes/no)?"),
        tool_call("cancel_pending_order", g.action.arguments),
        text(f"Order {g.order_id} is cancelled."),
    ])
    register_policy("fake", lambda model: OpenAIPolicy(model, base_url=server.url, max_retries=0))
    from rl.policies.base import make_policy

    policy = make_policy("fake:agent-model")
    async with retail_pool.sandbox() as sb:
        traj = await run_episode(task, policy, ScriptedCustomer(), sb, cache=GoldStateCache())
    assert traj.excluded is None, traj.error
    assert traj.reward == 1.0 and traj.ended_by == "user_stop" and traj.policy_model == "agent-model"
    assert server.script.remaining == 0
