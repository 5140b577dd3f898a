"""The static-query customer of the ablation: a non-interactive customer (`--user scripted-static`).

Its first message states the whole request: every goal it pursues (the task's static-query form,
`static_goals`: no abandoned goal, no haggling, late items folded in) with all its details, and its
identity (its right email, or its name and zip code). It answers no question afterwards: every later
message is `NO_ANSWER`, which gives no fact and no confirmation. It still ends the conversation
like the training customer: `###STOP###` once every goal is settled (a write of an `act` goal seen
in the conversation, or that write failing in the tools; a refusal said for a `refuse` goal; the
answers said for an `info` goal), or once the agent made no progress (nothing settled) for more than
`patience` replies. An agent can succeed: the opening holds what the tools need (authentication by
email or name and zip, every argument of the writes), and no tool waits for the customer's yes
(backend/tools), so an agent that acts on the stated request passes; one that waits for answers or
a confirmation cannot.
"""

from __future__ import annotations

import json

from rl.simulator import reading as R
from rl.simulator.bank import TrainingBank
from rl.simulator.base import STOP, Message, last_agent_text
from rl.simulator.scripted import static_goals
from rl.tasks.criteria import same_action
from rl.tasks.schema import Goal, Task

STATIC_VERSION = "static-2"  # 2: answers nothing after its opening (1 answered like the training customer)
NO_ANSWER = "I have nothing to add to my first message."


class StaticCustomer:
    """Factory of static-query sessions (the `UserSimulator` for `--user scripted-static`)."""

    name = "scripted-static"
    model = "scripted"
    prompt_version = STATIC_VERSION

    def __init__(self, *, patience: int = 3) -> None:
        self.patience = patience

    def session(self, task: Task, seed: int) -> StaticSession:
        del seed  # it says the same for every seed
        return StaticSession(task, patience=self.patience)


def static_opening(task: Task, goals: list[Goal]) -> str:
    """Every goal with all its details, then the identity, in the training customer's words."""
    bank = TrainingBank()
    parts = [" ".join([g.say, *g.details.values()]) for g in goals]
    c = task.customer
    identity = bank.email(c.email) if c.identify_by == "email" and c.knows_email else bank.name_zip(c)
    return " ".join(["Hi!", *parts, identity])


class StaticSession:
    def __init__(self, task: Task, *, patience: int = 3) -> None:
        self.task = task
        self.goals = static_goals(task.script.goals)
        self.settled: set[str] = set()
        self.patience = patience
        self.stuck = 0
        self.seen_calls: set[str] = set()
        self.finished = False

    async def respond(self, conversation: list[Message]) -> tuple[str, bool]:
        return self.reply(conversation)

    def reply(self, conversation: list[Message]) -> tuple[str, bool]:
        if self.finished:
            return STOP, True
        if not any(m.get("role") == "assistant" for m in conversation):
            return static_opening(self.task, self.goals), False
        before = len(self.settled)
        self._observe_tools(conversation)
        self._observe_text(last_agent_text(conversation))
        self.stuck = 0 if len(self.settled) > before else self.stuck + 1
        if len(self.settled) == len(self.goals) or self.stuck > self.patience:
            self.finished = True
            return f"{self.task.script.closing} {STOP}", True
        return NO_ANSWER, False

    def _pending(self, outcome: str) -> list[Goal]:
        return [g for g in self.goals if g.id not in self.settled and g.outcome == outcome]

    def _observe_tools(self, conversation: list[Message]) -> None:
        results = {m.get("tool_call_id"): str(m.get("content", "")) for m in conversation if m.get("role") == "tool"}
        for m in conversation:
            for call in m.get("tool_calls") or []:
                out = results.get(call.get("id"))
                if out is None or call.get("id") in self.seen_calls:
                    continue
                self.seen_calls.add(call.get("id"))
                name = call["function"]["name"]
                try:
                    raw = call["function"].get("arguments")
                    args = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
                except (ValueError, TypeError):
                    continue
                failed = out.startswith(("Error", "Unknown action"))
                for g in self._pending("act"):
                    if g.action is None:
                        continue
                    if failed and same_action(g.action, name, args) or not failed and _serves(g, name, args):
                        self.settled.add(g.id)
                        break

    def _observe_text(self, text: str) -> None:
        for g in self._pending("info"):
            if g.answer and all(R.said(text, a) for a in g.answer):
                self.settled.add(g.id)
        refused = self._pending("refuse")
        if refused and R.refuses(text):
            self.settled.add(refused[0].id)


def _serves(g: Goal, name: str, args: dict) -> bool:
    """A successful write of the goal's tool on the goal's order (or account)."""
    assert g.action is not None
    if g.action.name != name:
        return False
    key = "order_id" if "order_id" in g.action.arguments else "user_id"
    return args.get(key) == g.action.arguments.get(key)
