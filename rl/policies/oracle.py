"""The oracle agent (plays a task's gold plan like a careful agent) and the `hasty` baseline.

The oracle asks for the customer's identity and authenticates with what the customer says, then
takes the goals in the task's order: makes the lookups, asks whether the list of items is complete
where the policy wants it, describes the action and waits for an explicit yes before the write;
refuses forbidden requests with the policy's reason (again for every insistence), answers
information questions, and moves on when the customer changes their mind. The `hasty` baseline
is the same machinery without care: it acts on each goal as first stated, without asking for
confirmation or completeness, and hands over to a human when a tool refuses. `oracle:static` plays
the static-query form of a task (rl/simulator/static.py): the customer states everything up front
and answers nothing, so it acts on each goal after its lookups without asking.

It reads the customer loosely on purpose (an email anywhere; a name introduced as people introduce
themselves and a zip or postal code; a yes led by any plain affirmative), so that it passes with
every scripted customer's wording (the training and the held-out bank), and it follows the script
for what the words cannot say reliably: how many times a customer insists after a refusal.
"""

from __future__ import annotations

import json
import re
from typing import Any

from backend.agent.llm import Completion
from rl.policies import wording as W
from rl.policies.base import Message, text_message, tool_call_message
from rl.simulator.scripted import static_goals
from rl.tasks.phrasing import in_said_order
from rl.tasks.schema import Action, Goal, Task

EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# A name introduced as customers introduce themselves, and a five-digit zip named as a zip or postal code.
NAME = re.compile(r"(?i:\bname is|\bname's|\bthe name|\bI'm|\bI am|\bthis is)\s+([A-Z][\w'-]*) ([A-Z][\w'-]*)")
ZIP = re.compile(r"\b(?:zip|postal|post)(?: ?code)?(?: is)?:?\s+(\d{5})\b", re.I)
AFFIRMATIVE = re.compile(r"^\W*(yes|yeah|yep|sure|correct|confirm|i confirm|go ahead|please proceed|ok(ay)?,? go)\b",
                         re.I)


class OraclePolicy:
    def __init__(self, *, hasty: bool = False, static: bool = False) -> None:
        self.hasty = hasty
        self.static = static
        self.name = "hasty" if hasty else "oracle:static" if static else "oracle"
        self.model = self.name

    def session(self, task: Task, seed: int) -> OracleSession:
        del seed
        return OracleSession(task, hasty=self.hasty, static=self.static)


def oracle_policy(arg: str = "", **options: Any) -> OraclePolicy:
    """`oracle`, or `oracle:static` for the static-query customer (options such as an endpoint do not
    apply to it)."""
    del options
    if arg not in ("", "static"):
        raise ValueError(f"unknown oracle variant {arg!r}; use oracle or oracle:static")
    return OraclePolicy(static=arg == "static")


def hasty_policy(arg: str = "", **options: Any) -> OraclePolicy:
    del arg, options
    return OraclePolicy(hasty=True)


class OracleSession:
    def __init__(self, task: Task, *, hasty: bool = False, static: bool = False, item_options: bool = True,
                 item_refs: bool = False, payment_refs: bool = False, said_order: bool = False) -> None:
        self.task = task
        # a call writes an address's fields in the order the customer said them (phrasing.in_said_order)
        self.said_order = said_order
        self.item_options = item_options  # proposals name items with their options (rl/policies/wording.py)
        self.item_refs = item_refs  # ... or by product and item id, for a view with `item_refs`
        self.payment_refs = payment_refs  # payment methods named with their ids, for a view with `payment_refs`
        self.hasty = hasty
        self.static = static
        self.name = "hasty" if hasty else "oracle"
        self.goals = static_goals(task.script.goals) if static else task.script.goals
        self.haggled = 0
        self.k = 0
        self.phase = "start"
        self.authed = False
        self.identity_tries = 0
        self.queue: list[Action] = []
        self.n_calls = 0

    @property
    def goal(self) -> Goal | None:
        return self.goals[self.k] if self.k < len(self.goals) else None

    async def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> Completion:
        del tools
        return Completion.from_message(self._next(messages), self.name)

    # ------------------------------------------------------------------ decisions

    def _call(self, action: Action) -> Message:
        self.n_calls += 1
        args = in_said_order(action.arguments) if self.said_order else action.arguments
        return tool_call_message(f"call_{self.n_calls}", action.name, args)

    def _next(self, messages: list[Message]) -> Message:
        last = messages[-1]
        if last.get("role") == "tool":
            return self._after_tool(last, messages)
        if self.queue:
            return self._call(self.queue.pop(0))
        text = str(last.get("content") or "")
        if not self.authed:
            return self._identify(text)
        g = self.goal
        if g is None:
            return text_message("You're welcome! Is there anything else I can help you with?")
        if g.shift and g.shift.say in text or (self.phase == "proposed" and not AFFIRMATIVE.search(text)):
            return self._next_goal(messages)
        if self.phase == "proposed":
            self.phase = "acting"
            return self._call(g.action)
        if self.phase == "asked_complete":
            return self._propose(g, messages)
        if self.phase == "refused":
            # the script says how often the customer insists: refuse each time, whatever the words
            if g.haggle and self.haggled < len(g.haggle.demands):
                self.haggled += 1
                return text_message(f"I understand, but I'm afraid I can't: {g.explain}.")
            return self._next_goal(messages)
        if self.phase in ("reported", "answered", "failed"):
            return self._next_goal(messages)
        return self._start_goal(messages)

    def _identify(self, text: str) -> Message:
        self.identity_tries += 1
        email = EMAIL.search(text)
        name, zip_ = NAME.search(text), ZIP.search(text)
        c = self.task.customer
        if email:
            return self._call(Action(name="find_user_id_by_email", arguments={"email": email.group(0)}))
        if name and zip_:
            return self._call(Action(name="find_user_id_by_name_zip", arguments={
                "first_name": name.group(1), "last_name": name.group(2), "zip": zip_.group(1)}))
        if self.identity_tries > 3:  # the customer never said it plainly: use what the task says they are
            from rl.tasks.build import identity_action

            return self._call(identity_action(c))
        return text_message("I'd be happy to help. First I need to verify your identity: could you please "
                            "give me your email, or your first name, last name and zip code?")

    def _after_tool(self, result: Message, messages: list[Message]) -> Message:
        out = str(result.get("content") or "")
        name = result.get("name") or _call_name(messages, result.get("tool_call_id"))
        ok = not out.startswith(("Error", "Unknown action"))
        if name and name.startswith("find_user_id"):
            if not ok:
                return text_message("I couldn't find an account with those details. Could you double-check "
                                    "your email, or give me your first name, last name and zip code?")
            self.authed = True
            return self._start_goal(messages)
        if self.queue:
            return self._call(self.queue.pop(0))
        g = self.goal
        if self.phase == "acting" and g is not None:
            if ok:
                self.phase = "reported"
                return text_message(W.report(g, messages) + " Is there anything else I can help you with?")
            if self.hasty:
                self.phase = "failed"
                return self._call(Action(name="transfer_to_human_agents",
                                         arguments={"summary": f"Could not complete the request: {out}"}))
            self.phase = "failed"
            return text_message(f"I'm sorry, that did not go through: {out}")
        if self.phase == "lookups" and g is not None:
            return self._decide(g, messages)
        return text_message("Is there anything else I can help you with?")

    def _start_goal(self, messages: list[Message]) -> Message:
        g = self.goal
        if g is None:
            return text_message("Is there anything else I can help you with?")
        self.phase = "lookups"
        self.queue = list(g.lookups)
        pm = g.action.arguments.get("payment_method_id") if g.action else None
        if pm and not any(a.name == "get_user_details" for a in self.queue):
            self.queue.append(Action(name="get_user_details", arguments={"user_id": self.task.customer.user_id}))
        if self.queue:
            return self._call(self.queue.pop(0))
        return self._decide(g, messages)

    def _next_goal(self, messages: list[Message]) -> Message:
        self.k += 1
        self.phase = "start"
        self.haggled = 0
        if self.goal is None:
            return text_message("Understood. Is there anything else I can help you with?")
        return self._start_goal(messages)

    def _decide(self, g: Goal, messages: list[Message]) -> Message:
        if g.outcome == "info":
            self.phase = "answered"
            return text_message(W.answer(g))
        if self.hasty:
            action = g.stated_action or g.action
            if action is None:
                self.phase = "refused"
                return text_message(f"I'm sorry, I can't help with that: {g.explain}.")
            self.phase = "acting"
            return self._call(action)
        if g.outcome == "refuse" or g.action is None:
            self.phase = "refused"
            return text_message(f"I'm sorry, but I can't {W.refusal(g, messages, self.payment_refs)}: {g.explain}.")
        if self.static:  # the customer said everything up front and answers nothing: act on it
            self.phase = "acting"
            return self._call(g.action)
        if (g.kind in ("exchange", "modify_items") or g.late) and self.phase != "asked_complete":
            self.phase = "asked_complete"
            return text_message(f"Have you listed all the items you want to {W.VERB.get(g.kind, 'change')}? "
                                "Please tell me now if there are any others.")
        return self._propose(g, messages)

    def _propose(self, g: Goal, messages: list[Message]) -> Message:
        self.phase = "proposed"
        assert g.action is not None
        return text_message(W.proposal(g.action, messages, self.item_options, self.item_refs, self.payment_refs))


def _call_name(messages: list[Message], call_id: Any) -> str | None:
    for m in reversed(messages):
        for c in m.get("tool_calls") or []:
            if c.get("id") == call_id:
                return c["function"]["name"]
    return None


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
