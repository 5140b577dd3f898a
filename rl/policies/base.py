"""The agent-policy interface episodes run against, and the registry that builds one from a spec.

An `AgentPolicy` opens an `AgentSession` per episode; `await session.step(messages)` returns the
next assistant message in OpenAI format (text for the customer, or tool calls) as an `AgentTurn`
with the model name, latency and an optional `trace` (token ids / log-probs for training, opaque
here). A failure of the policy's *infrastructure* (endpoint down, timeout) raises `PolicyError`
and the episode is excluded from scores; a bad answer (malformed tool call, wrong action) is the
agent's own failure and is scored.

Specs: `oracle`, `hasty`, `openai:MODEL`, and `local:PATH` - the slot for in-process checkpoints,
filled by whoever calls `register_policy("local", factory)` (the learning side does, on import of
`rl.policies.local` when that module exists).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from rl.tasks.schema import Task

Message = dict[str, Any]


@dataclass
class AgentTurn:
    message: Message  # {"role": "assistant", "content": ..., "tool_calls": [...]}
    model: str
    latency_ms: float = 0.0
    usage: dict[str, Any] = field(default_factory=dict)
    trace: Any = None  # policy-specific training data (not written to episode files)


class PolicyError(RuntimeError):
    """The policy could not answer for reasons outside the agent (infrastructure)."""

    def __init__(self, message: str, cause: str = "policy_infra") -> None:
        super().__init__(message)
        self.cause = cause


class AgentSession(Protocol):
    async def step(self, messages: list[Message]) -> AgentTurn: ...


class AgentPolicy(Protocol):
    name: str  # the spec it was built from
    model: str

    def session(self, task: Task, tools: list[dict[str, Any]], seed: int) -> AgentSession: ...


PolicyFactory = Callable[[str], AgentPolicy]  # argument: what follows "prefix:" in the spec
_FACTORIES: dict[str, PolicyFactory] = {}
_LAZY_MODULES = {"local": "rl.policies.local"}


def register_policy(prefix: str, factory: PolicyFactory) -> None:
    """Make `prefix[:ARG]` specs build policies with `factory(ARG)`."""
    _FACTORIES[prefix] = factory


def make_policy(spec: str, **options: Any) -> AgentPolicy:
    """Build a policy from `oracle`, `hasty`, `openai:MODEL` or a registered `prefix:ARG`."""
    prefix, _, arg = spec.partition(":")
    if prefix == "oracle":
        from rl.policies.oracle import OraclePolicy

        return OraclePolicy()
    if prefix == "hasty":
        from rl.policies.oracle import OraclePolicy

        return OraclePolicy(hasty=True)
    if prefix == "openai":
        if not arg:
            raise ValueError("openai policy needs a model: --policy openai:MODEL")
        from rl.policies.openai_policy import OpenAIPolicy

        return OpenAIPolicy(arg, **options)
    if prefix not in _FACTORIES and prefix in _LAZY_MODULES:
        try:
            importlib.import_module(_LAZY_MODULES[prefix])
        except ModuleNotFoundError as e:
            raise ValueError(f"policy {prefix!r} is not available ({e})") from None
    if prefix in _FACTORIES:
        return _FACTORIES[prefix](arg)
    known = ["oracle", "hasty", "openai:MODEL", *(f"{p}:..." for p in sorted(set(_FACTORIES) | set(_LAZY_MODULES)))]
    raise ValueError(f"unknown policy {spec!r}; known: {', '.join(known)}")


def tool_call_message(call_id: str, name: str, arguments: dict[str, Any], content: str | None = None) -> Message:
    import json

    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": call_id, "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def text_message(text: str) -> Message:
    return {"role": "assistant", "content": text}
