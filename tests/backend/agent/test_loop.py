"""The agent loop on the real tool registry and a private tau store, with a scripted fake
model: tool results go back to the model, one call per step unless configured otherwise,
and every way a turn can end gives the customer a reply."""

from __future__ import annotations

from typing import Any

import backend.tools.retail  # noqa: F401  (registers the tools)
from backend.agent.llm import Completion, OpenAICompatibleModel, ToolCallRequest
from backend.agent.loop import (
    STEP_LIMIT,
    TRY_AGAIN,
    AgentConfig,
    AgentLoop,
    AssistantStep,
    Reply,
    ToolStep,
    agent_turn,
)
from backend.agent.policy import STORE_POLICY
from backend.tools.context import Principal, ToolContext
from backend.tools.registry import RETAIL, ToolResult
from tests.fakes.openai_server import FakeOpenAIServer, Script, error, text, tool_call, tool_calls


async def run(server: FakeOpenAIServer, conn, config: AgentConfig | None = None,
              content: str = "hello") -> tuple[list[Any], ToolContext]:
    model = OpenAICompatibleModel(base_url=server.url, model="fake-model", max_retries=0, timeout_s=2)
    ctx = ToolContext(conn, principal=Principal.customer())

    async def run_tool(call: ToolCallRequest) -> ToolResult:
        return await RETAIL.call(ctx, call.name, call.arguments)

    loop = AgentLoop(RETAIL, config)
    events = [e async for e in loop.run_turn(model, [{"role": "user", "content": content}], run_tool)]
    await model.close()
    return events, ctx


async def test_tool_results_go_back_to_the_model_until_it_answers(tau_conn, tau_retail) -> None:
    user_id, user = next(iter(tau_retail["users"].items()))
    script = Script([tool_call("find_user_id_by_email", {"email": user["email"]}, call_id="a"), text("Found you.")])
    with FakeOpenAIServer(script) as server:
        events, ctx = await run(server, tau_conn)
    assert [type(e) for e in events] == [AssistantStep, ToolStep, Reply]
    assert events[1].result.output == user_id and ctx.principal.user_id == user_id
    assert events[2].content == "Found you." and events[2].reason == "answer" and not events[2].notice
    second = server.requests[1]["messages"]
    assert second[0] == {"role": "system", "content": STORE_POLICY}
    assert second[-1] == {"role": "tool", "tool_call_id": "a", "content": user_id}
    assert second[-2]["tool_calls"][0]["function"]["name"] == "find_user_id_by_email"


async def test_one_tool_call_per_step_unless_configured(tau_conn) -> None:
    two = tool_calls(("think", {"thought": "one"}), ("think", {"thought": "two"}))
    with FakeOpenAIServer(Script([two, text("ok")])) as server:
        events, _ = await run(server, tau_conn)
    assert [e.name for e in events if isinstance(e, ToolStep)] == ["think"]
    assert len(events[0].message["tool_calls"]) == 1
    two = tool_calls(("think", {"thought": "one"}), ("calculate", {"expression": "2 + 3"}))
    with FakeOpenAIServer(Script([two, text("ok")])) as server:
        events, _ = await run(server, tau_conn, AgentConfig(tool_calls_per_step=2))
    steps = [e for e in events if isinstance(e, ToolStep)]
    assert [(s.name, s.result.output) for s in steps] == [("think", ""), ("calculate", "5.0")]


async def test_every_ending_gives_the_customer_a_reply(tau_conn) -> None:
    with FakeOpenAIServer(Script([tool_call("think", {"thought": "x"})] * 2)) as server:
        events, _ = await run(server, tau_conn, AgentConfig(max_steps=2))
    assert events[-1] == Reply(STEP_LIMIT, None, reason="step_limit") and len(server.requests) == 2
    with FakeOpenAIServer(Script([error(500)])) as server:
        events, _ = await run(server, tau_conn)
    assert events == [Reply(TRY_AGAIN, None, reason="llm_unavailable")]
    with FakeOpenAIServer(Script([tool_call("transfer_to_human_agents", {"summary": "angry customer"})])) as server:
        events, _ = await run(server, tau_conn)
    assert events[-1].reason == "transfer" and events[-2].result.output == "Transfer successful"
    with FakeOpenAIServer(Script([text("")])) as server:
        events, _ = await run(server, tau_conn)
    assert events[-1].reason == "empty" and events[-1].notice


async def test_model_written_call_ids_are_kept_short(tau_conn) -> None:
    with FakeOpenAIServer(Script([tool_call("think", {"thought": "x"}, call_id="x" * 500), text("ok")])) as server:
        events, _ = await run(server, tau_conn)
    call_id = events[0].message["tool_calls"][0]["id"]
    assert len(call_id) <= 64 and events[1].call_id == call_id
    assert server.requests[1]["messages"][-1]["tool_call_id"] == call_id


class InProcess:
    """A model that is not an HTTP endpoint (as an in-process policy is): scripted completions."""

    def __init__(self, name: str, *completions: Completion) -> None:
        self.name, self.completions, self.seen = name, list(completions), []

    async def complete(self, messages, tools):
        self.seen.append([dict(m) for m in messages])
        return self.completions.pop(0)


async def test_an_unreadable_call_is_answered_with_its_error_and_runs_nothing(tau_conn) -> None:
    ran: list[str] = []

    async def run_tool(call: ToolCallRequest) -> ToolResult:
        ran.append(call.name)
        return await RETAIL.call(ToolContext(tau_conn, principal=Principal.customer()), call.name, call.arguments)

    model = InProcess("local", Completion("", [ToolCallRequest("c1", "malformed_tool_call", "{}",
                                                               error="Error: malformed tool call: not valid JSON")]),
                      Completion("Sorry, what is your email?"))
    messages = [{"role": "system", "content": "p"}, {"role": "user", "content": "hi"}]
    events = [e async for e in agent_turn(messages, model, RETAIL.openai_schemas(), run_tool)]
    assert ran == [] and [type(e) for e in events] == [AssistantStep, ToolStep, Reply]
    assert not events[1].ran and events[1].result.output == "Error: malformed tool call: not valid JSON"
    assert model.seen[1][-1] == {"role": "tool", "tool_call_id": "c1", "content": events[1].result.output}
    assert messages[-1] == {"role": "assistant", "content": "Sorry, what is your email?"}  # extended in place


async def test_the_model_is_chosen_per_turn(tau_conn) -> None:
    loop = AgentLoop(RETAIL)
    first, second = InProcess("v1", Completion("one", model="v1")), InProcess("v2", Completion("two", model="v2"))

    async def run_tool(call: ToolCallRequest) -> ToolResult:
        raise AssertionError("no tool is called")

    history = [{"role": "user", "content": "hi"}]
    [a] = [e async for e in loop.run_turn(first, history, run_tool)]
    history += [{"role": "assistant", "content": a.content}, {"role": "user", "content": "again"}]
    [b] = [e async for e in loop.run_turn(second, history, run_tool)]
    assert (a.content, a.model, b.content, b.model) == ("one", "v1", "two", "v2")
    assert second.seen[0][0] == {"role": "system", "content": STORE_POLICY} and second.seen[0][1:] == history
