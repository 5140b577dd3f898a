"""What a scripted customer says, apart from when it says it: the phrasing bank.

`ScriptedSession` (rl/simulator/scripted.py) decides what happens in a conversation (which goal is
current, which fact to reveal, yes or no, shift, haggle, stop); a `Bank` turns each of those
decisions into words. `TrainingBank` says exactly what the task's script says (its goal
statements, details, shift and haggling lines) plus the training customer's fixed lines: the
customer of cold-start data and RL. The held-out evaluation customer (rl/simulator/heldout.py)
plays the same script with a bank of its own, so a policy is tested on wordings it never saw.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod

from rl.tasks.goals import REASONS
from rl.tasks.schema import Customer, Goal, Task

YES = ["Yes, please go ahead.", "Yes, that's right. Please proceed.", "Yes, I confirm."]
THANKS = ["Great, thank you.", "Perfect, thanks.", "Thanks!"]


class Bank(ABC):
    """The words of one customer session (a bank may hold per-session state, such as its own rng)."""

    # ------------------------------------------------------------ goals and their facts

    @abstractmethod
    def opening(self, task: Task) -> str: ...

    @abstractmethod
    def closing(self, task: Task) -> str: ...

    @abstractmethod
    def statement(self, goal: Goal, next_request: bool) -> str:
        """How the customer states `goal` (`next_request`: as its next request after another one,
        else in its opening or when it restates its current goal)."""

    @abstractmethod
    def shift(self, dropped: Goal, nxt: Goal) -> str:
        """The customer drops `dropped` and asks for `nxt` instead."""

    @abstractmethod
    def detail(self, goal: Goal, slot: str) -> str:
        """The fact `slot` of `goal`, told when asked."""

    @abstractmethod
    def late(self, goal: Goal) -> str:
        """The item added only when the agent checks the list is complete."""

    @abstractmethod
    def reason(self, goal: Goal, reason: str) -> str:
        """The customer's reason (`reason`: the tool's value, e.g. 'no longer needed')."""

    @abstractmethod
    def demand(self, goal: Goal, i: int) -> str:
        """The i-th insistence after a refusal of `goal` (i < len(goal.haggle.demands))."""

    @abstractmethod
    def after_haggle(self, goal: Goal, fallback: Goal | None) -> str:
        """The customer gives in (accepting `fallback`, or giving up when it is None)."""

    # ------------------------------------------------------------ identity

    @abstractmethod
    def email(self, email: str) -> str: ...

    @abstractmethod
    def name_zip(self, c: Customer) -> str: ...

    @abstractmethod
    def corrected_email(self, email: str, asked: bool) -> str:
        """The right email after the wrong one was not found (`asked`: the agent asked for it again)."""

    def volunteers_identity(self) -> bool:
        """Whether the customer gives its identity in its opening, unasked."""
        return False

    # ------------------------------------------------------------ reactions

    @abstractmethod
    def yes(self, rng: random.Random) -> str: ...

    @abstractmethod
    def thanks(self, rng: random.Random) -> str: ...

    @abstractmethod
    def go_ahead(self) -> str:
        """The customer already said yes and the agent has not acted yet."""

    @abstractmethod
    def cannot_be_done(self) -> str:
        """The wanted action failed in the tools."""

    @abstractmethod
    def give_up(self) -> str:
        """The agent stopped making progress."""

    @abstractmethod
    def accept_refusal(self) -> str: ...

    @abstractmethod
    def are_you_sure(self, restate: str) -> str:
        """The agent refused something the customer is entitled to."""

    @abstractmethod
    def wrong_reason(self, reason: str) -> str:
        """A proposal names another reason than the customer's own (`reason`: its words; "": the
        customer keeps them to itself)."""

    @abstractmethod
    def not_wanted(self, restate: str) -> str:
        """A proposal the customer does not want."""

    @abstractmethod
    def dont_know(self, restate: str) -> str:
        """A question about a fact the customer does not hold."""

    def arrange(self, facts: list[str]) -> list[str]:
        """The order in which the facts of one answer are told (after the identity)."""
        return facts


class TrainingBank(Bank):
    """The training customer's words: the script's own lines and the fixed training sentences."""

    def opening(self, task: Task) -> str:
        return task.script.opening

    def closing(self, task: Task) -> str:
        return task.script.closing

    def statement(self, goal: Goal, next_request: bool) -> str:
        return goal.say

    def shift(self, dropped: Goal, nxt: Goal) -> str:
        assert dropped.shift is not None
        return dropped.shift.say

    def detail(self, goal: Goal, slot: str) -> str:
        return goal.details[slot]

    def late(self, goal: Goal) -> str:
        assert goal.late is not None
        return goal.late

    def reason(self, goal: Goal, reason: str) -> str:
        return goal.details.get("reason") or REASONS[reason]

    def demand(self, goal: Goal, i: int) -> str:
        assert goal.haggle is not None
        return goal.haggle.demands[i]

    def after_haggle(self, goal: Goal, fallback: Goal | None) -> str:
        return goal.haggle.say_after if goal.haggle else "I see, okay."

    def email(self, email: str) -> str:
        return f"My email is {email}."

    def name_zip(self, c: Customer) -> str:
        lead = "I don't remember my email, but m" if not c.knows_email else "M"
        return f"{lead}y name is {c.first_name} {c.last_name} and my zip code is {c.zip}."

    def corrected_email(self, email: str, asked: bool) -> str:
        return f"Sorry, my mistake. It's {email}." if asked else f"Sorry, my mistake. My email is {email}."

    def yes(self, rng: random.Random) -> str:
        return rng.choice(YES)

    def thanks(self, rng: random.Random) -> str:
        return rng.choice(THANKS)

    def go_ahead(self) -> str:
        return "Yes, please go ahead with it."

    def cannot_be_done(self) -> str:
        return "I see, that can't be done then."

    def give_up(self) -> str:
        return "Never mind, let's leave it."

    def accept_refusal(self) -> str:
        return "I see, okay."

    def are_you_sure(self, restate: str) -> str:
        return f"Are you sure? {restate}"

    def wrong_reason(self, reason: str) -> str:
        return f"No, that's not the reason. {reason}".strip()

    def not_wanted(self, restate: str) -> str:
        return "No, that's not what I want. " + restate

    def dont_know(self, restate: str) -> str:
        return "I'm not sure I know that. " + restate
