"""The cold-start teacher: the oracle's plan, played only on what the conversation has revealed.

The oracle (rl/policies/oracle.py) knows the task's hidden goal, so it looks up an order the
customer never named and proposes a cancellation reason nobody gave. Trajectories like that teach a
student to guess what it cannot see. The teacher wraps an oracle session and holds back any message
that relies on a fact the customer has not said yet: before a tool call on an order whose id is not
in the conversation it asks for the order id; before a proposal it asks for every detail of the
current goal (reason, items, payment method, address) the customer has not stated. When the customer
has answered, the held message goes out unchanged, so the oracle's own state is never disturbed.

Corrections: in a share of conversations (`corrections`, chosen per task) the teacher's first
proposal is a wrong one (the other cancellation reason for a cancellation, a cancellation for any
other change), the customer says no, and the teacher proposes the right change before it writes.
So the student sees that an answer to a proposal other than a yes is not a yes. The wrong proposal
is marked after the episode and kept out of the loss (rl/coldstart/data.py `mark_retracted_proposals`).
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Callable
from typing import Any

from backend.agent.llm import Completion
from rl.coldstart.data import is_proposal
from rl.policies.base import Message, text_message
from rl.policies.oracle import OracleSession
from rl.policies.wording import proposal
from rl.simulator.varied import wordings as varied_wordings
from rl.tasks.goals import REASONS
from rl.tasks.phrasing import order_ref
from rl.tasks.schema import Action, Task

Wordings = Callable[[str], list[str]]

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

    def __init__(self, *, corrections: float = 0.0, wordings: Wordings | None = None,
                 item_options: bool = True, item_refs: bool = False, payment_refs: bool = False,
                 said_order: bool = False) -> None:
        if not 0.0 <= corrections <= 1.0:
            raise ValueError(f"corrections is a share of conversations in 0..1, not {corrections}")
        self.corrections = corrections
        # proposals name items with their options; off for a student whose view shows items by name
        self.item_options = item_options
        # ... or by product and item id, which a view with `item_refs` shows as the item's reference
        self.item_refs = item_refs
        # payment methods named with their ids, which a view with `payment_refs` shows as references
        self.payment_refs = payment_refs
        # calls write an address's fields in the order the customer said them (rl/tasks/phrasing.py)
        self.said_order = said_order
        # every wording of a training sentence the customer may use (None: the varied customer's)
        self.wordings = wordings or varied_wordings

    def session(self, task: Task, seed: int) -> TeacherSession:
        # chosen per task, not per trial: the same task always gets the same kind of conversation
        del seed
        draw = random.Random(zlib.crc32(f"corrections:{task.id}".encode())).random()
        return TeacherSession(task, wrong_first=draw < self.corrections, wordings=self.wordings,
                              item_options=self.item_options, item_refs=self.item_refs,
                              payment_refs=self.payment_refs, said_order=self.said_order)


class TeacherSession:
    name = "teacher"

    def __init__(self, task: Task, *, wrong_first: bool = False, wordings: Wordings = varied_wordings,
                 item_options: bool = True, item_refs: bool = False, payment_refs: bool = False,
                 said_order: bool = False) -> None:
        self.oracle = OracleSession(task, item_options=item_options, item_refs=item_refs, payment_refs=payment_refs,
                                    said_order=said_order)
        self.wordings = wordings
        self.held: Message | None = None
        self.asked: set[tuple[str, str]] = set()  # (goal id, slot) already asked
        self.wrong_first = wrong_first  # the first proposal is a wrong one the customer will correct

    async def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> Completion:
        return Completion.from_message(self._next(messages), self.name)

    def _next(self, messages: list[Message]) -> Message:
        if self.held is not None and messages[-1].get("role") == "user":
            msg = self._ask_next(self.held, messages)
            if msg is None:
                msg, self.held = self.held, None
                return self._maybe_wrong(msg, messages)
            return msg
        msg = self.oracle._next(messages)
        question = self._ask_next(msg, messages)
        if question is not None:
            self.held = msg
            return question
        return self._maybe_wrong(msg, messages)

    def _maybe_wrong(self, msg: Message, messages: list[Message]) -> Message:
        """A wrong proposal instead of `msg` (which is held for after the customer's no) when this
        conversation has one and `msg` is its first proposal; `msg` otherwise."""
        goal = self.oracle.goal
        if not self.wrong_first or not is_proposal(msg) or goal is None or goal.action is None:
            return msg
        wrong = wrong_action(goal.action)
        if wrong is None:
            return msg
        self.wrong_first = False
        self.held = msg
        return text_message(proposal(wrong, messages, self.oracle.item_options, self.oracle.item_refs,
                                     self.oracle.payment_refs))

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
                if slot in QUESTIONS and slot != "order_id" and not _was_said(answer, said, self.wordings):
                    needed.append(slot)
        for slot in needed:
            if (gid, slot) not in self.asked:
                self.asked.add((gid, slot))
                return text_message(QUESTIONS[slot])
        return None


def wrong_action(action: Action) -> Action | None:
    """A change the customer did not ask for, on the same order: the other reason for a cancellation,
    a cancellation (a common mix-up of the student) for any other change of an order."""
    order_id = action.arguments.get("order_id")
    if not order_id:
        return None
    if action.name == "cancel_pending_order":
        others = sorted(r for r in REASONS if r != action.arguments.get("reason"))
        return Action(name=action.name, arguments={**action.arguments, "reason": others[0]}) if others else None
    return Action(name="cancel_pending_order", arguments={"order_id": order_id, "reason": sorted(REASONS)[0]})


def _was_said(answer: str, said: str, wordings: Wordings) -> bool:
    """Whether the customer has told the fact `answer` (the script's sentence), in the training
    customer's words or in any of its `wordings` (the varied or the wide training customer's)."""
    first = answer.strip().split(". ")[0]
    return any(_essence(w) in said for w in wordings(first if first.endswith((".", "?")) else first + "."))


def _essence(answer: str) -> str:
    """The part of a scripted answer that must have been said (its first clause, lowercased)."""
    return answer.lower().split(".")[0].strip()
