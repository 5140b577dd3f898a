"""The LLM-backed customer against a fake OpenAI-compatible server: what the prompt holds, stop
tokens, retries, timeouts, empty replies, the early-stop correction, and what it records."""

from __future__ import annotations

import json

import pytest

from rl.simulator.base import SimulatorError
from rl.simulator.llm import PROMPT_VERSION, LLMCustomer
from rl.tasks.build import assemble
from rl.tasks.schema import Action, Customer, Goal
from tests.fakes.openai_server import FakeOpenAIServer, Script, delay, error, text

CANCEL = Action(name="cancel_pending_order", arguments={"order_id": "#W100", "reason": "no longer needed"})
TASK = assemble(
    task_id="t-llm", snapshot="tau-retail", split="test", tags=[],
    customer=Customer(user_id="ann_lee_1", first_name="Ann", last_name="Lee", email="ann.lee@example.com",
                      zip="10001"),
    goals=[Goal(id="g0", kind="cancel", outcome="act", say="I'd like to cancel order #W100.", action=CANCEL,
                order_id="#W100", details={"reason": "I no longer need it."})])


def convo(*turns: dict) -> list[dict]:
    return [{"role": "system", "content": "store policy"}, *turns]


@pytest.fixture
def server():
    script = Script([])
    with FakeOpenAIServer(script) as srv:
        srv.script = script
        yield srv


async def test_prompt_holds_rules_instruction_checklist_and_swapped_roles(server):
    server.script.extend([text("Hi, I want to cancel order #W100.")])
    sim = LLMCustomer("user-model", base_url=server.url, max_retries=0)
    session = sim.session(TASK, seed=3)
    conversation = convo({"role": "user", "content": "Hello"},
                         {"role": "assistant", "content": "How can I help?"},
                         {"role": "assistant", "content": None, "tool_calls": [
                             {"id": "c1", "type": "function",
                              "function": {"name": "get_order_details", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "c1", "content": "{}"},
                         {"role": "assistant", "content": "Which order?"})
    reply, done = await session.respond(conversation)
    assert (reply, done) == ("Hi, I want to cancel order #W100.", False)
    body = server.requests[-1]
    assert body["model"] == "user-model" and body["seed"] == 3
    system = body["messages"][0]["content"]
    assert "ann.lee@example.com" in system and "###STOP###" in system and "Never invent" in system
    assert "[ ] I'd like to cancel order #W100." in system
    roles = [(m["role"], m["content"]) for m in body["messages"][1:]]
    assert roles == [("assistant", "Hello"), ("user", "How can I help?"), ("user", "Which order?")]
    assert (sim.name, sim.model, sim.prompt_version) == ("llm:user-model", "user-model", PROMPT_VERSION)


async def test_checklist_ticks_goals_the_agent_completed(server):
    server.script.extend([text("Thanks! ###STOP###")])
    session = LLMCustomer("m", base_url=server.url).session(TASK, seed=0)
    call = {"id": "c9", "type": "function", "function": {"name": "cancel_pending_order",
                                                          "arguments": json.dumps(CANCEL.arguments)}}
    reply, done = await session.respond(convo(
        {"role": "user", "content": "Cancel #W100 please."}, {"role": "user", "content": "yes"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c9", "content": '{"status": "cancelled"}'},
        {"role": "assistant", "content": "Done, it is cancelled."}))
    assert done and "###STOP###" in reply
    assert "[x] I'd like to cancel order #W100." in server.requests[-1]["messages"][0]["content"]


async def test_transfer_token_ends_the_conversation(server):
    server.script.extend([text("###TRANSFER###")])
    reply, done = await LLMCustomer("m", base_url=server.url).session(TASK, 0).respond(
        convo({"role": "assistant", "content": "I am transferring you to a human agent."}))
    assert done and reply == "###TRANSFER###"


async def test_server_errors_are_retried_a_bounded_number_of_times(server):
    server.script.extend([error(500), error(503), text("Hello, I need help.")])
    session = LLMCustomer("m", base_url=server.url, max_retries=2).session(TASK, 0)
    assert await session.respond(convo()) == ("Hello, I need help.", False)
    assert len(server.requests) == 3
    server.script.extend([error(500), error(500)])
    with pytest.raises(SimulatorError) as e:
        await LLMCustomer("m", base_url=server.url, max_retries=1).session(TASK, 0).respond(convo())
    assert e.value.cause == "simulator_error"


async def test_timeout_raises_a_simulator_timeout(server):
    server.script.extend([delay(2.0)])
    session = LLMCustomer("m", base_url=server.url, timeout_s=0.3, max_retries=0).session(TASK, 0)
    with pytest.raises(SimulatorError) as e:
        await session.respond(convo())
    assert e.value.cause == "simulator_timeout"


async def test_empty_replies_are_a_simulator_failure(server):
    server.script.extend([text(""), text("")])
    with pytest.raises(SimulatorError) as e:
        await LLMCustomer("m", base_url=server.url, max_retries=1).session(TASK, 0).respond(convo())
    assert e.value.cause == "simulator_empty"


async def test_stopping_right_after_yes_is_asked_again(server):
    server.script.extend([text("Great. ###STOP###"), text("Okay, please go ahead.")])
    session = LLMCustomer("m", base_url=server.url).session(TASK, 0)
    reply, done = await session.respond(convo(
        {"role": "assistant", "content": "Shall I cancel order #W100 (yes/no)?"},
        {"role": "user", "content": "Yes, please."},
        {"role": "assistant", "content": "Alright."}))
    assert (reply, done) == ("Okay, please go ahead.", False)
    assert "nothing has been changed yet" in server.requests[-1]["messages"][-1]["content"]
