"""The agent as any OpenAI-compatible tool-calling model (vLLM with Qwen3's hermes parser, hosted APIs).

Each step sends the episode's messages and the tool schemas and returns the model's message. When a
server runs without a tool-call parser, hermes-style `<tool_call>{...}</tool_call>` blocks in the
text are turned into tool calls here; a block that is not valid JSON stays text (the agent's own
mistake, scored as such). Endpoint failures after bounded retries raise `PolicyError` (excluded).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from rl.llm import ChatEndpoint, EndpointUnavailable
from rl.policies.base import AgentTurn, Message, PolicyError
from rl.tasks.schema import Task

HERMES_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


class OpenAIPolicy:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float | None = None, max_retries: int | None = None, temperature: float = 0.0,
                 max_tokens: int = 1024, extra_body: dict[str, Any] | None = None) -> None:
        self.endpoint = ChatEndpoint(model, base_url=base_url, api_key=api_key, timeout_s=timeout_s,
                                     max_retries=max_retries)
        self.name = f"openai:{model}"
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra_body = extra_body

    def session(self, task: Task, tools: list[dict[str, Any]], seed: int) -> OpenAISession:
        del task
        return OpenAISession(self, tools, seed)


def parse_hermes(content: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Split hermes `<tool_call>` blocks out of text; returns (remaining text, tool calls)."""
    calls = []
    for i, m in enumerate(HERMES_CALL.finditer(content)):
        try:
            obj = json.loads(m.group(1))
        except ValueError:
            continue
        if not isinstance(obj, dict) or "name" not in obj:
            continue
        calls.append({"id": f"call_h{i}", "type": "function",
                      "function": {"name": str(obj["name"]), "arguments": json.dumps(obj.get("arguments", {}))}})
    if not calls:
        return content, []
    rest = HERMES_CALL.sub("", content).strip()
    return rest or None, calls


class OpenAISession:
    def __init__(self, policy: OpenAIPolicy, tools: list[dict[str, Any]], seed: int) -> None:
        self.policy = policy
        self.tools = tools
        self.seed = seed

    async def step(self, messages: list[Message]) -> AgentTurn:
        p = self.policy
        kwargs: dict[str, Any] = {"tools": self.tools, "temperature": p.temperature, "max_tokens": p.max_tokens,
                                  "seed": self.seed}
        if p.extra_body:
            kwargs["extra_body"] = p.extra_body
        t0 = time.perf_counter()
        try:
            resp = await p.endpoint.chat(messages, **kwargs)
        except EndpointUnavailable as e:
            raise PolicyError(str(e), f"policy_{e.kind}") from None
        msg = resp.choices[0].message
        content = msg.content
        calls = [{"id": c.id, "type": "function",
                  "function": {"name": c.function.name, "arguments": c.function.arguments or "{}"}}
                 for c in (msg.tool_calls or [])]
        if not calls and content and "<tool_call>" in content:
            content, calls = parse_hermes(content)
        out: Message = {"role": "assistant", "content": content}
        if calls:
            out["tool_calls"] = calls
        usage = resp.usage.model_dump() if getattr(resp, "usage", None) else {}
        return AgentTurn(message=out, model=getattr(resp, "model", None) or p.model,
                         latency_ms=(time.perf_counter() - t0) * 1000, usage=usage)
