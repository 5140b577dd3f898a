"""The cold-start teacher: the oracle's plan, played only on what the conversation has revealed.

The oracle (rl/policies/oracle.py) knows the task's hidden goal, so it looks up an order the
customer never named and proposes a cancellation reason nobody gave. Trajectories like that teach a
student to guess what it cannot see. The teacher wraps an oracle session and holds back any message
that relies on a fact the customer has not said yet: before a tool call on an order whose id is not
in the conversation it asks for the order id; before a proposal it asks for every detail of the
current goal (reason, items, payment method, address) the customer has not stated. When the customer
has answered, the held message goes out unchanged, so the oracle's own state is never disturbed.
"""

from __future__ import annotations

import json
from typing import Any

from backend.agent.llm import Completion
from rl.policies.base import Message, text_message
from rl.policies.oracle import OracleSession
from rl.simulator.varied import wordings
from rl.tasks.phrasing import order_ref
from rl.tasks.schema import Task

QUESTIONS = {
    "order_id": "Could you please tell me the order id?",
    "reason": "Could you tell me the reason for the cancellation?",
    "items": "Which items would you like to change?",
    "new_items": "Which new items would you like instead?",
    "payment": "Which payment method would you like to use?",
    "address": "What is the new address?",
}


def _customer_text(messages: list[Message]) -> str:
    return " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "user").lower()


class TeacherPolicy:
    """`AgentPolicy` for cold-start data: an oracle that asks before it relies on hidden facts."""

    name = "teacher"
    model = "teacher"

    def session(self, task: Task, seed: int) -> TeacherSession:
        del seed
        return TeacherSession(task)


class TeacherSession:
    name = "teacher"

    def __init__(self, task: Task) -> None:
        self.oracle = OracleSession(task)
        self.held: Message | None = None
        self.asked: set[tuple[str, str]] = set()  # (goal id, slot) already asked

    async def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> Completion:
        return Completion.from_message(self._next(messages), self.name)

    def _next(self, messages: list[Message]) -> Message:
        if self.held is not None and messages[-1].get("role") == "user":
            msg = self._ask_next(self.held, messages)
            if msg is None:
                msg, self.held = self.held, None
            return msg
        msg = self.oracle._next(messages)
        question = self._ask_next(msg, messages)
        if question is not None:
            self.held = msg
            return question
        return msg

    def _ask_next(self, msg: Message, messages: list[Message]) -> Message | None:
        """A question for the first fact `msg` relies on that the customer has not said, if any."""
        said = _customer_text(messages)
        goal = self.oracle.goal
        gid = goal.id if goal is not None else "-"
        needed: list[str] = []
        for call in msg.get("tool_calls") or []:
            args = call["function"].get("arguments")
            args = json.loads(args) if isinstance(args, str) else (args or {})
            oid = args.get("order_id")
            if oid and order_ref(oid).lower().lstrip("#") not in said:
                needed.append("order_id")
        if goal is not None and not msg.get("tool_calls") and "(yes/no)" in str(msg.get("content") or ""):
            for slot, answer in goal.details.items():
                if slot in QUESTIONS and slot != "order_id" and not _was_said(answer, said):
                    needed.append(slot)
        for slot in needed:
            if (gid, slot) not in self.asked:
                self.asked.add((gid, slot))
                return text_message(QUESTIONS[slot])
        return None


def _was_said(answer: str, said: str) -> bool:
    """Whether the customer has told the fact `answer` (the script's sentence), in the training
    customer's words or in any wording of the varied training customer (rl/simulator/varied.py)."""
    first = answer.strip().split(". ")[0]
    return any(_essence(w) in said for w in wordings(first if first.endswith((".", "?")) else first + "."))


def _essence(answer: str) -> str:
    """The part of a scripted answer that must have been said (its first clause, lowercased)."""
    return answer.lower().split(".")[0].strip()
