"""The simulated-customer interface every episode talks to.

A `UserSimulator` is a factory (one per evaluation) that opens a `UserSession` per episode. A
session answers `respond(conversation) -> (reply, done)` where `conversation` is the episode's
OpenAI-format messages so far (system, user, assistant with tool calls, tool results) and `done`
says the customer ended the conversation (`###STOP###`, `###TRANSFER###`, `###OUT-OF-SCOPE###`).
Failures of the simulator itself raise `SimulatorError` (an endpoint down, an empty reply, or a
customer contradicting its own goal: `simulator_contradiction`); the runner excludes them from scores
with their cause, and summaries count them apart from the agent's failures (`simulator_failures`).
"""

from __future__ import annotations

from typing import Any, Protocol

from rl.tasks.schema import Task

STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"
STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)

SIMULATOR_CAUSE_PREFIX = "simulator_"  # every `SimulatorError` cause starts with it
Message = dict[str, Any]


class SimulatorError(RuntimeError):
    """The simulator could not produce a reply (endpoint down, timeout, empty output...)."""

    def __init__(self, message: str, cause: str = "simulator_error") -> None:
        super().__init__(message)
        self.cause = cause


class UserSession(Protocol):
    async def respond(self, conversation: list[Message]) -> tuple[str, bool]: ...


class UserSimulator(Protocol):
    name: str  # "scripted" or "llm:<model>"
    model: str
    prompt_version: str

    def session(self, task: Task, seed: int) -> UserSession: ...


def simulator_failures(excluded: dict[str, int]) -> int:
    """How many of the excluded episodes (cause -> count) the simulator caused."""
    return sum(n for cause, n in excluded.items() if cause.startswith(SIMULATOR_CAUSE_PREFIX))


def ended_by(reply: str) -> str | None:
    """Which stop token a reply carries, if any."""
    for token in STOP_TOKENS:
        if token in reply:
            return token
    return None


def last_agent_text(conversation: list[Message]) -> str:
    for m in reversed(conversation):
        if m.get("role") == "assistant" and m.get("content"):
            return str(m["content"])
        if m.get("role") == "user":
            return ""
    return ""


def make_user(spec: str, **options: Any) -> UserSimulator:
    """Build a simulator from `scripted`, `scripted-static` or `llm:MODEL` (options go to the LLM one)."""
    if spec in ("scripted", "scripted-static"):
        from rl.simulator.scripted import ScriptedCustomer

        return ScriptedCustomer(static=spec == "scripted-static")
    prefix, _, model = spec.partition(":")
    if prefix == "llm" and model:
        from rl.simulator.llm import LLMCustomer

        return LLMCustomer(model, **options)
    raise ValueError(f"unknown user simulator {spec!r}; use scripted, scripted-static or llm:MODEL")
