"""The agent-policy interface episodes run against, and the one registry that builds a policy from a spec.

An `AgentPolicy` opens a model per episode: `policy.session(task, seed)` returns a
`backend.agent.llm.ChatModel` (`await model.complete(messages, tools)` gives the next assistant
message as a `Completion`, with an optional `trace` of training data), and the episode runs it
through the same agent step as the chat service (`backend.agent.loop.agent_turn`). A failure of the
policy's *infrastructure* (endpoint down, timeout) raises `LLMUnavailable` and the episode is
excluded from scores with cause `policy_<kind>`; a bad answer (malformed tool call, wrong action) is
the agent's own failure and is scored.

Every spec `PREFIX[:ARG]` is built the same way: `factory(ARG, **options)`, the factory registered
for PREFIX. The built-in ones (`oracle`, `hasty`, `openai:MODEL`, `local:PATH`) are imported when
first asked for, so `oracle` never needs torch; `register_policy` adds others.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any, Protocol

from backend.agent.llm import ChatModel
from rl.tasks.schema import Task

Message = dict[str, Any]


class AgentPolicy(Protocol):
    name: str  # the spec it was built from
    model: str

    def session(self, task: Task, seed: int) -> ChatModel: ...


PolicyFactory = Callable[..., AgentPolicy]  # factory(ARG, **options): ARG is what follows "prefix:"
_FACTORIES: dict[str, PolicyFactory] = {}
_BUILT_IN = {"oracle": "rl.policies.oracle:oracle_policy", "hasty": "rl.policies.oracle:hasty_policy",
             "openai": "rl.policies.openai_policy:openai_policy", "local": "rl.policies.local:local_policy"}
_SPECS = {"oracle": "oracle", "hasty": "hasty", "openai": "openai:MODEL", "local": "local:PATH"}


def register_policy(prefix: str, factory: PolicyFactory) -> None:
    """Make `prefix[:ARG]` specs build policies with `factory(ARG, **options)`."""
    _FACTORIES[prefix] = factory


def make_policy(spec: str, **options: Any) -> AgentPolicy:
    """Build a policy from `oracle`, `hasty`, `openai:MODEL`, `local:PATH` or a registered `prefix:ARG`."""
    prefix, _, arg = spec.partition(":")
    factory = _FACTORIES.get(prefix)
    if factory is None and prefix in _BUILT_IN:
        module, _, attr = _BUILT_IN[prefix].partition(":")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as e:
            raise ValueError(f"policy {prefix!r} is not available ({e})") from None
        _FACTORIES[prefix] = factory
    if factory is None:
        known = [_SPECS.get(p, f"{p}:...") for p in sorted(set(_FACTORIES) | set(_BUILT_IN))]
        raise ValueError(f"unknown policy {spec!r}; known: {', '.join(known)}")
    return factory(arg, **options)


def tool_call_message(call_id: str, name: str, arguments: dict[str, Any], content: str | None = None) -> Message:
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def text_message(text: str) -> Message:
    return {"role": "assistant", "content": text}
