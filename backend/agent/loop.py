"""The agent loop: answer one customer message by calling the model and running its tool calls.

For each customer message the loop sends the system prompt (our store policy), the
conversation so far and the registry's tool schemas to the model. A tool call is run
through the caller's `run_tool` (which knows the database connection and who the
conversation is authenticated as) and its result goes back to the model; a text answer
ends the turn. Only the first `tool_calls_per_step` calls of one model step are kept (one,
as tau-bench counts). Malformed calls (unknown tool, invalid JSON, wrong types) are not
special cases: the tool layer answers them with an `Error: ...` text the model can read.
The loop stops at `max_steps` model calls per message, when a terminal tool (transfer to a
human) succeeds, or when the model is unavailable; each ending gives the customer a reply.

The loop yields events (`AssistantStep`, `ToolStep`, `Reply`) so that the service can
persist each one as it happens and stream it to the customer.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from backend.agent.llm import ChatModel, LLMUnavailable, ToolCallRequest
from backend.agent.policy import system_prompt
from backend.tools.registry import ToolRegistry, ToolResult

log = structlog.get_logger(__name__)

TRY_AGAIN = ("I'm sorry, I'm having trouble answering right now. Please try again in a moment; "
             "nothing about your request has been lost.")
STEP_LIMIT = ("I'm sorry, I wasn't able to finish that. Could you tell me once more what you need, "
              "or ask me to transfer you to a human agent?")
EMPTY_ANSWER = "I'm sorry, could you rephrase that?"
TRANSFERRED = "I've passed your request to a human agent, who will take it from here."

RunTool = Callable[[ToolCallRequest], Awaitable[ToolResult]]


@dataclass
class AgentConfig:
    max_steps: int = 20
    tool_calls_per_step: int = 1


@dataclass
class AssistantStep:
    """The model asked for tool calls (and may have said something alongside)."""

    message: dict[str, Any]
    model: str


@dataclass
class ToolStep:
    call_id: str
    name: str
    arguments: str
    result: ToolResult
    message: dict[str, Any]
    model: str


@dataclass
class Reply:
    """The end of the turn: what the customer reads."""

    content: str
    model: str | None
    # answer | step_limit | llm_unavailable | transfer | empty
    reason: str = "answer"

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


class AgentLoop:
    """Runs turns of one agent (a model + a tool registry + a policy)."""

    def __init__(self, model: ChatModel, registry: ToolRegistry, config: AgentConfig | None = None,
                 policy: str | None = None) -> None:
        self.model = model
        self.registry = registry
        self.config = config or AgentConfig()
        self.system_message = {"role": "system", "content": system_prompt() if policy is None else policy}
        self.tools = registry.openai_schemas()

    async def run_turn(self, history: list[dict[str, Any]], run_tool: RunTool,
                       stats: TurnStats | None = None) -> AsyncIterator[AgentEvent]:
        """Answer the last customer message of `history` (OpenAI-shaped messages, no system)."""
        stats = stats if stats is not None else TurnStats()
        messages = [self.system_message, *history]
        for _ in range(max(1, self.config.max_steps)):
            start = time.perf_counter()
            try:
                completion = await self.model.complete(messages, self.tools)
            except LLMUnavailable as e:
                stats.model_seconds += time.perf_counter() - start
                log.error("agent.model_unavailable", kind=e.kind, error=str(e))
                yield Reply(TRY_AGAIN, None, reason="llm_unavailable")
                return
            stats.model_seconds += time.perf_counter() - start
            stats.model_calls += 1
            stats.models.append(completion.model)
            if not completion.tool_calls:
                if not completion.content:
                    yield Reply(EMPTY_ANSWER, completion.model, reason="empty")
                else:
                    yield Reply(completion.content, completion.model)
                return
            calls = completion.tool_calls[: max(1, self.config.tool_calls_per_step)]
            for c in calls:  # ids are echoed back to the model and stored: keep them short and present
                if not c.id or len(c.id) > 64:
                    c.id = f"call_{uuid.uuid4().hex[:24]}"
            assistant = {
                "role": "assistant",
                "content": completion.content,
                "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in calls
                ],
            }
            messages.append(_for_model(assistant))
            yield AssistantStep(assistant, completion.model)
            for call in calls:
                result = await run_tool(call)
                stats.tool_calls += 1
                tool_message = {"role": "tool", "tool_call_id": call.id, "content": result.output}
                messages.append(tool_message)
                yield ToolStep(call.id, call.name, call.arguments, result, tool_message, completion.model)
                if result.terminal and result.ok:
                    yield Reply(TRANSFERRED, completion.model, reason="transfer")
                    return
        log.warning("agent.step_limit", max_steps=self.config.max_steps)
        yield Reply(STEP_LIMIT, None, reason="step_limit")


def _for_model(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message as it is sent back to the model: tool-call arguments that are not a
    JSON object are replaced by `{}` (servers such as vLLM reject the history otherwise); the
    tool result that follows tells the model what was wrong."""
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
    return [_for_model(m) if m.get("role") == "assistant" else m for m in messages]


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, TypeError, RecursionError):
        return False
