"""The one agent step, shared by the chat service, RL episodes and anything else that runs the agent.

`agent_turn(messages, model, tools, run_tool, config=...)` answers the last customer message of
`messages` (OpenAI-shaped, system message first): it calls `model.complete(messages, tools)`,
keeps only the first `tool_calls_per_step` calls of a model step (one, as tau-bench counts),
gives calls a short id, runs each kept call through `run_tool` and sends its result back to the
model, until the model answers in text. A call the model side could not read at all (it carries
an `error`) is answered with that error text and nothing runs; every other malformed call
(unknown tool, invalid JSON, wrong types) goes to `run_tool`, whose tool layer answers it with an
`Error: ...` text the model can read. Arguments that are not a JSON object are sent back to the
model as `{}` (servers such as vLLM reject the history otherwise). The turn also ends after
`max_steps` model calls, when a terminal tool (transfer to a human) succeeds, or when the model is
unavailable; each ending yields a `Reply` that says why.

`messages` is extended in place with what the model is shown next (its assistant messages, the
tool results, its final answer), so a caller that keeps one conversation going - an episode -
passes the same list again after the customer's next message. Events (`AssistantStep`,
`ToolStep`, `Reply`) let the chat service persist and stream each step as it happens. The model is
an argument of every turn: any `ChatModel` (an HTTP endpoint, an in-process policy).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from backend.agent.llm import ChatModel, Completion, LLMUnavailable, ToolCallRequest
from backend.agent.policy import system_prompt
from backend.config import Settings
from backend.tools.registry import ToolRegistry, ToolResult

log = structlog.get_logger(__name__)

TRY_AGAIN = ("I'm sorry, I'm having trouble answering right now. Please try again in a moment; "
             "nothing about your request has been lost.")
STEP_LIMIT = ("I'm sorry, I wasn't able to finish that. Could you tell me once more what you need, "
              "or ask me to transfer you to a human agent?")
EMPTY_ANSWER = "I'm sorry, could you rephrase that?"
TRANSFERRED = "I've passed your request to a human agent, who will take it from here."

RunTool = Callable[[ToolCallRequest], Awaitable[ToolResult]]


@dataclass(frozen=True)
class AgentConfig:
    max_steps: int = 20  # model calls per customer message
    tool_calls_per_step: int = 1

    @classmethod
    def from_settings(cls, settings: Settings) -> AgentConfig:
        return cls(max_steps=settings.agent_max_steps, tool_calls_per_step=settings.agent_tool_calls_per_step)


@dataclass
class AssistantStep:
    """The model asked for tool calls (and may have said something alongside); `message` is the
    assistant message as stored, with the kept calls only."""

    message: dict[str, Any]
    model: str
    trace: Any = None


@dataclass
class ToolStep:
    call_id: str
    name: str
    arguments: str
    result: ToolResult
    message: dict[str, Any]
    model: str
    ran: bool = True  # False: the model side could not read the call; its error was the answer


@dataclass
class Reply:
    """The end of the turn: what the customer reads."""

    content: str
    model: str | None
    # answer | step_limit | llm_unavailable | transfer | empty
    reason: str = "answer"
    error: LLMUnavailable | None = field(default=None, compare=False)  # why the model was unavailable
    trace: Any = field(default=None, compare=False)

    @property
    def notice(self) -> bool:
        """A service text rather than the model's words (not shown to the model later)."""
        return self.reason != "answer"


AgentEvent = AssistantStep | ToolStep | Reply


@dataclass
class TurnStats:
    model_seconds: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    models: list[str] = field(default_factory=list)


async def agent_turn(messages: list[dict[str, Any]], model: ChatModel, tools: list[dict[str, Any]],
                     run_tool: RunTool, *, config: AgentConfig = AgentConfig(),
                     stats: TurnStats | None = None) -> AsyncIterator[AgentEvent]:
    """Answer the last customer message of `messages` (extended in place); yields the steps."""
    stats = stats if stats is not None else TurnStats()
    for _ in range(max(1, config.max_steps)):
        start = time.perf_counter()
        try:
            completion = await model.complete(messages, tools)
        except LLMUnavailable as e:
            stats.model_seconds += time.perf_counter() - start
            log.error("agent.model_unavailable", kind=e.kind, error=str(e))
            yield Reply(TRY_AGAIN, None, reason="llm_unavailable", error=e)
            return
        stats.model_seconds += time.perf_counter() - start
        stats.model_calls += 1
        stats.models.append(completion.model)
        if not completion.tool_calls:
            messages.append({"role": "assistant", "content": completion.content})
            if not completion.content:
                yield Reply(EMPTY_ANSWER, completion.model, reason="empty", trace=completion.trace)
            else:
                yield Reply(completion.content, completion.model, trace=completion.trace)
            return
        calls = kept_calls(completion, config)
        assistant = {"role": "assistant", "content": completion.content,
                     "tool_calls": [{"id": c.id, "type": "function",
                                     "function": {"name": c.name, "arguments": c.arguments}} for c in calls]}
        messages.append(for_model(assistant))
        yield AssistantStep(assistant, completion.model, trace=completion.trace)
        for call in calls:
            ran = call.error is None
            result = await run_tool(call) if ran else unreadable_call(call)
            stats.tool_calls += 1
            tool_message = {"role": "tool", "tool_call_id": call.id, "content": result.output}
            messages.append(tool_message)
            yield ToolStep(call.id, call.name, call.arguments, result, tool_message, completion.model, ran=ran)
            if result.terminal and result.ok:
                yield Reply(TRANSFERRED, completion.model, reason="transfer")
                return
    log.warning("agent.step_limit", max_steps=config.max_steps)
    yield Reply(STEP_LIMIT, None, reason="step_limit")


def kept_calls(completion: Completion, config: AgentConfig) -> list[ToolCallRequest]:
    """The calls of one model step that are run: the first `tool_calls_per_step`, each with an id
    that is present and short (ids are echoed back to the model and stored)."""
    calls = completion.tool_calls[: max(1, config.tool_calls_per_step)]
    for c in calls:
        if not c.id or len(c.id) > 64:
            c.id = f"call_{uuid.uuid4().hex[:24]}"
    return calls


def unreadable_call(call: ToolCallRequest) -> ToolResult:
    """The answer to a call the model side could not read: its error, nothing run."""
    return ToolResult(call.name, str(call.error or "Error: malformed tool call"), ok=False)


class AgentLoop:
    """The production agent: the store policy as system message, the registry's tools, and the
    step limits, applied to turns of any model (`model` may change from one turn to the next)."""

    def __init__(self, registry: ToolRegistry, config: AgentConfig | None = None,
                 policy: str | None = None) -> None:
        self.registry = registry
        self.config = config or AgentConfig()
        self.system_message = {"role": "system", "content": system_prompt() if policy is None else policy}
        self.tools = registry.openai_schemas()

    def run_turn(self, model: ChatModel, history: list[dict[str, Any]], run_tool: RunTool,
                 stats: TurnStats | None = None) -> AsyncIterator[AgentEvent]:
        """Answer the last customer message of `history` (OpenAI-shaped messages, no system)."""
        messages = [self.system_message, *history_for_model(history)]
        return agent_turn(messages, model, self.tools, run_tool, config=self.config, stats=stats)


def for_model(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message as it is sent back to the model: tool-call arguments that are not a
    JSON object are replaced by `{}`; the tool result that follows tells the model what was wrong."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    fixed = []
    for c in calls:
        args = c["function"]["arguments"]
        if not _is_json_object(args):
            c = {**c, "function": {**c["function"], "arguments": "{}"}}
        fixed.append(c)
    return {**message, "tool_calls": fixed}


def history_for_model(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored messages (OpenAI shape) made safe to send back to a model."""
    return [for_model(m) if m.get("role") == "assistant" else m for m in messages]


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, TypeError, RecursionError):
        return False
