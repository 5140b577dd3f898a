"""The simulated-customer interface every episode talks to.

A `UserSimulator` is a factory (one per evaluation) that opens a `UserSession` per episode. A
session answers `respond(conversation) -> (reply, done)` where `conversation` is the episode's
OpenAI-format messages so far (system, user, assistant with tool calls, tool results) and `done`
says the customer ended the conversation (`###STOP###`, `###TRANSFER###`, `###OUT-OF-SCOPE###`).
Failures of the simulator itself raise `SimulatorError` (an endpoint down, an empty reply, or a
customer contradicting its own goal: `simulator_contradiction`); the runner excludes them from scores
with their cause, and summaries count them apart from the agent's failures (`simulator_failures`).
A session may also say, in `agreed` after each reply, whether that reply consented to the change the
agent proposed, and in `agreed_to` which change (a `Consent`: the write and its order); the episode
then holds every write to that consent (rl/env/consent.py). The scripted sessions do; a session
without `agreed` leaves writes unchecked, as tau-bench does.

`make_user(spec)` builds one by name:
- `scripted` (rl/simulator/scripted.py): the training customer. It plays the task's script in the
  training phrasing bank; cold-start data, RL rollouts and the training-style evaluation use it.
- `varied` (rl/simulator/varied.py): the training customer in several wordings of each sentence
  (values kept verbatim); cpu-tiny's cold-start data, RL rollouts and training-style evaluation use it.
- `wide` (rl/simulator/wide.py): the varied customer with many more wordings of each sentence
  (other verbs, forms and names of the order), apart from the held-out customer's by every
  four-word run.
- `heldout` (rl/simulator/heldout.py): the evaluation customer. The same script and behaviour with a
  phrasing bank and identity formats training never uses, so evaluation measures generalization
  to other wordings (as the paper evaluates with another user simulator than training's).
- `heldout-known` (rl/simulator/known_words.py): the held-out customer with sentences made only of
  words the training customers say (values apart): other wordings in the language the model was taught.
- `scripted-static` (rl/simulator/static.py): the non-interactive customer of the static-query
  ablation. It states everything up front, then answers nothing, and stops like the others.
- `llm:MODEL` (rl/simulator/llm.py): an LLM plays the customer from the task's instruction, for
  evaluation when an endpoint is configured.

`NoisyCustomer` (rl/simulator/noisy.py) wraps any of them for GRPO's rollouts only (the recipe's
`grpo_customer_noise`): the same customer, with random words in its messages as the agent reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Consent:
    """The change a customer's yes covers: one write tool, on one order (None: the write names no
    order, as a change of the account's address)."""

    tool: str | None  # None: the yes was to a request no store write serves
    order_id: str | None = None

    def covers(self, tool: str, arguments: dict[str, Any]) -> bool:
        return self.tool == tool and (self.order_id is None or arguments.get("order_id") == self.order_id)


class UserSession(Protocol):
    async def respond(self, conversation: list[Message]) -> tuple[str, bool]: ...


class UserSimulator(Protocol):
    name: str  # "scripted", "heldout", "scripted-static" or "llm:<model>"
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


def make_user(spec: str, *, quiet_reasons: float = 0.0, **options: Any) -> UserSimulator:
    """Build a simulator from `scripted`, `varied`, `wide`, `heldout`, `heldout-known`, `scripted-static`
    or `llm:MODEL`
    (options go to the LLM one). `quiet_reasons`: how often a training customer (`scripted`, `varied`,
    `wide`) refuses a proposal with the other cancellation reason without saying its own."""
    if quiet_reasons and spec not in ("scripted", "varied", "wide"):
        raise ValueError(f"quiet_reasons is for the training customers, not {spec!r}")
    if spec == "scripted":
        from rl.simulator.scripted import ScriptedCustomer

        return ScriptedCustomer(quiet_reasons=quiet_reasons)
    if spec == "varied":
        from rl.simulator.varied import VariedCustomer

        return VariedCustomer(quiet_reasons=quiet_reasons)
    if spec == "wide":
        from rl.simulator.wide import WideCustomer

        return WideCustomer(quiet_reasons=quiet_reasons)
    if spec == "heldout":
        from rl.simulator.heldout import HeldOutCustomer

        return HeldOutCustomer()
    if spec == "heldout-known":
        from rl.simulator.known_words import KnownWordsCustomer

        return KnownWordsCustomer()
    if spec == "scripted-static":
        from rl.simulator.static import StaticCustomer

        return StaticCustomer()
    prefix, _, model = spec.partition(":")
    if prefix == "llm" and model:
        from rl.simulator.llm import LLMCustomer

        return LLMCustomer(model, **options)
    raise ValueError(f"unknown user simulator {spec!r}; "
                     "use scripted, varied, wide, heldout, heldout-known, scripted-static or llm:MODEL")
