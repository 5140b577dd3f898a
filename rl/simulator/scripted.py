"""The scripted customer: plays a task's `Script` deterministically (for a given seed).

It opens with its first goal, answers the agent's questions only from the facts it holds (saying
it does not know anything else), reveals late details only when the agent checks the list is
complete, says yes to a proposal only when it matches its *current* goal (kind, order id and the
distinctive terms), drops a goal for the next one when the shift trigger fires (a confirmation
trigger fires only on a request to confirm what the customer asked for: its kind, on its order;
a customer who gives up on such a goal never reaches the change of mind), insists on a
forbidden request once per refusal as scripted and then accepts the fallback or gives up, and
says `###STOP###` only once its last goal is done (seen as a successful write of that goal in the
conversation), refused, or after the agent stopped making progress for `patience` replies - never
right after saying yes, before the agent has acted. A proposal to cancel for another reason than
the customer's (the reason is graded) is answered with a correction, as a customer who said "I no
longer need it" would answer a proposal that names "ordered by mistake". The kind of a proposal is
read outside the records it quotes (rl/simulator/proposal.py). Refusing a proposal that states the
goal's action in full would contradict the goal: the session raises `SimulatorError` with cause
`simulator_contradiction` instead, and the episode is excluded.

After each reply, `agreed` says whether that reply gave the customer's consent to a change: a yes to
a proposal matching its goal, or its "go ahead" standing by that yes; `agreed_to` says which change
(the goal's write, on its order), so a yes to a proposed cancellation never covers a return. The
episode runner reads it to hold every store write to the policy's rule that a change needs the
customer's explicit yes (rl/env/consent.py).

The session decides; its `Bank` (rl/simulator/bank.py) words each decision. `ScriptedCustomer`
uses the training bank; the held-out customer (rl/simulator/heldout.py) plays the same sessions
with another bank, and the static-query customer (rl/simulator/static.py) is a session of its own.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from rl.simulator import reading as R
from rl.simulator.bank import Bank, TrainingBank
from rl.simulator.base import STOP, Consent, Message, SimulatorError, last_agent_text
from rl.simulator.proposal import Records, states_action
from rl.tasks.criteria import same_action
from rl.tasks.goals import REASONS
from rl.tasks.phrasing import proposal_matches, proposes_request
from rl.tasks.schema import Goal, Task
from rl.tasks.tools_meta import KIND_TOOL, WRITE_TOOLS

# 6: reports what its yes covers (`agreed_to`); 5: a write that took effect spends the yes;
# 4: reports its consent (`agreed`); 3: reads a proposal outside the records it quotes
SCRIPT_VERSION = "scripted-6"
CONTRADICTION = "simulator_contradiction"  # the excluded cause of a customer contradicting its goal


class ScriptedCustomer:
    """Factory of scripted sessions (the `UserSimulator` for `--user scripted`)."""

    name = "scripted"
    model = "scripted"
    prompt_version = SCRIPT_VERSION
    bank: Callable[[Task, int], Bank] | None = None  # how it words its decisions (None: TrainingBank)

    def __init__(self, *, patience: int = 3, quiet_reasons: float = 0.0) -> None:
        if not 0.0 <= quiet_reasons <= 1.0:
            raise ValueError(f"quiet_reasons is a probability in 0..1, not {quiet_reasons}")
        self.patience = patience
        self.quiet_reasons = quiet_reasons
        if quiet_reasons:  # a different customer: its episodes and models say so
            self.name = f"{type(self).name}+quiet{quiet_reasons:g}"

    def session(self, task: Task, seed: int) -> ScriptedSession:
        return ScriptedSession(task, seed, patience=self.patience, bank=type(self).bank,
                               quiet_reasons=self.quiet_reasons)


def static_goals(goals: list[Goal]) -> list[Goal]:
    """The goals a static-query customer pursues: no abandoned goals, no haggling."""
    out = []
    for i, g in enumerate(goals):
        if g.outcome == "abandon":
            continue
        if g.haggle and g.haggle.then == "accept" and i + 1 < len(goals):
            continue  # the fallback goal follows
        g = g.model_copy(update={"shift": None, "haggle": None, "late": None,
                                 "upfront": list(g.details)})
        if goals[i].late:
            g.details = {**g.details, "items": g.details.get("items", "") + " " + goals[i].late}
        out.append(g)
    return out


class ScriptedSession:
    def __init__(self, task: Task, seed: int, *, patience: int = 3,
                 bank: Callable[[Task, int], Bank] | None = None, quiet_reasons: float = 0.0) -> None:
        self.task = task
        self.rng = random.Random(f"{seed}:{task.id}")
        # A proposal with the other cancellation reason is refused without the customer's own reason
        # with this probability (drawn from a stream of its own, so 0 changes nothing else): the
        # agent then has to read the refusal itself, not the reason's words, and switch.
        self.quiet_reasons = quiet_reasons
        self.quiet_rng = random.Random(f"quiet:{seed}:{task.id}")
        self.bank = bank(task, seed) if bank else TrainingBank()
        self.goals = list(task.script.goals)
        self.k = 0
        self.status: dict[str, str] = {}
        self.patience = patience
        self.stuck = 0
        self.turns_on_goal = 0
        self.haggled = 0
        self.confirmed = False
        self.late_given = False
        self.wrong_email_given = False
        self.authenticated = False
        self.revealed: set[str] = set()
        self.finished = False
        self.seen_calls: set[str] = set()
        self.records = Records()
        self.agreed = False  # whether the last reply consented to the proposed change
        self.agreed_to: Consent | None = None  # and to which change

    # -------------------------------------------------------------------- the interface

    async def respond(self, conversation: list[Message]) -> tuple[str, bool]:
        return self.reply(conversation)

    def reply(self, conversation: list[Message]) -> tuple[str, bool]:
        self.agreed, self.agreed_to = False, None
        if self.finished:
            return STOP, True
        if not any(m.get("role") == "assistant" for m in conversation):
            return self._opening(), False
        self._observe_tools(conversation)
        self.records = Records.from_conversation(conversation)
        text = last_agent_text(conversation)
        self.turns_on_goal += 1
        if self.k < len(self.goals) and self.status.get(self.goal.id) == "done":
            return self._advance(prefix=self.bank.thanks(self.rng))
        if self.k < len(self.goals) and self.status.get(self.goal.id) == "failed":
            return self._advance(prefix=self.bank.cannot_be_done())
        if self.k >= len(self.goals):
            return self._finish("")
        return self._react(text)

    # -------------------------------------------------------------------- state

    @property
    def goal(self) -> Goal:
        return self.goals[self.k]

    def _opening(self) -> str:
        self.revealed.update(self.goal.upfront)
        opening = self.bank.opening(self.task)
        if self.bank.volunteers_identity():
            opening += " " + self._identity_line(self.task.customer.identify_by == "email")
        return opening

    def _observe_tools(self, conversation: list[Message]) -> None:
        results = {m.get("tool_call_id"): str(m.get("content", "")) for m in conversation if m.get("role") == "tool"}
        for m in conversation:
            for call in m.get("tool_calls") or []:
                out = results.get(call.get("id"))
                if out is None or call.get("id") in self.seen_calls:
                    continue
                self.seen_calls.add(call.get("id"))
                name = call["function"]["name"]
                if out.startswith(("Error", "Unknown action")):
                    if self._is_gold_call(name, call["function"].get("arguments")):
                        self.status[self.goal.id] = "failed"  # the very action wanted cannot be done
                    continue
                if name.startswith("find_user_id"):
                    self.authenticated = True
                elif self.k < len(self.goals) and self._serves(name, call["function"].get("arguments")):
                    self.status[self.goal.id] = "done"
                elif name in WRITE_TOOLS:
                    # a change went through but not the one agreed to: that yes is spent, and the
                    # customer must not "go ahead" on it to a change nobody proposed
                    self.confirmed = False

    def _is_gold_call(self, name: str, arguments: object) -> bool:
        g = self.goals[self.k] if self.k < len(self.goals) else None
        if g is None or g.outcome != "act" or g.action is None:
            return False
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
        except (ValueError, TypeError):
            return False
        return same_action(g.action, name, args)

    def _serves(self, name: str, arguments: object) -> bool:
        g = self.goal
        if g.action is None or g.action.name != name or g.outcome == "info":
            return False
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
        except (ValueError, TypeError):
            return False
        key = "order_id" if "order_id" in g.action.arguments else "user_id"
        return args.get(key) == g.action.arguments.get(key)

    def _advance(self, prefix: str = "", status: str | None = None) -> tuple[str, bool]:
        """Close the current goal and state the next one (or say goodbye)."""
        done = self.goal
        if status:
            self.status[done.id] = status
        self.k += 1
        if done.shift and self.status.get(done.id) == "failed" and self.k < len(self.goals):
            # the goal `done` shifts to is the customer's change of mind when asked to confirm
            # `done`; one who gave up on `done` (or found it impossible) never got there
            self.status[self.goal.id] = "not_reached"
            self.k += 1
        self.turns_on_goal = 0
        self.haggled = self.stuck = 0
        self.confirmed = self.late_given = False
        if self.k >= len(self.goals):
            return self._finish(prefix)
        nxt = self.goal
        self.revealed.update(nxt.upfront)
        line = self.bank.shift(done, nxt) if done.shift and status != "abandoned" \
            and self.status.get(done.id) == "done" else self.bank.statement(nxt, next_request=True)
        return f"{prefix} {line}".strip(), False

    def _finish(self, prefix: str) -> tuple[str, bool]:
        self.finished = True
        return f"{prefix} {self.bank.closing(self.task)} {STOP}".strip(), True

    def _give_up(self) -> tuple[str, bool]:
        return self._advance(prefix=self.bank.give_up(), status="failed")

    # -------------------------------------------------------------------- reacting

    def _react(self, text: str) -> tuple[str, bool]:
        g = self.goal
        if g.shift and (
            (g.shift.trigger == "confirmation" and R.asks_confirmation(text) and self._proposes_goal(text))
            or (g.shift.trigger == "agent_turn" and self.turns_on_goal >= g.shift.after_turns)
        ):
            self.status[g.id] = "abandoned"
            shift = self.bank.shift(g, self.goals[self.k + 1]) if self.k + 1 < len(self.goals) else g.shift.say
            self._advance(status="abandoned")
            return shift, False
        if g.outcome == "info" and g.answer and all(R.said(text, a) for a in g.answer):
            return self._advance(prefix=self.bank.thanks(self.rng), status="done")
        if g.late and not self.late_given and (R.asks_completeness(text) or R.asks_confirmation(text)):
            self.late_given = True
            return self.bank.late(g), False
        if R.asks_confirmation(text) and g.outcome != "info":
            wrong = self._wrong_reason(text)
            if wrong:
                quiet = self.quiet_reasons and self.quiet_rng.random() < self.quiet_reasons
                return self._refuse(text, self.bank.wrong_reason("" if quiet else wrong))
            if proposal_matches(text, g.kind, g.confirm_terms, kind_text=self.records.outside_descriptions(text)):
                self.confirmed = self.agreed = True
                self.agreed_to = self._consent()
                return self.bank.yes(self.rng), False
            if g.outcome == "refuse" and g.haggle:
                return self._haggle()
            return self._refuse(text, self.bank.not_wanted(self._restate()))
        if R.refuses(text) and self.authenticated:
            if g.outcome == "refuse":
                return self._haggle()
            if not R.asks_question(text):
                return self._nudge(self.bank.are_you_sure(self._restate()))
        slots = R.asked_slots(text)
        if slots:
            return self._answer(text, slots)
        if self.confirmed:
            return self._go_ahead()
        if R.asks_question(text) and not R.offers_help(text):
            return self._nudge(self.bank.dont_know(self._restate()))
        return self._nudge(self._restate())

    def _proposes_goal(self, text: str) -> bool:
        """Whether a confirmation request proposes what the customer asked for: the current goal's
        kind of action, on its order when it has one. A customer changes their mind when asked to
        confirm their own request; offered something else ("shall I cancel it?" to one who asked
        for a new address), they say no as to any proposal they did not ask for, or an agent that
        proposes a cancellation for every request would have every shift to a cancellation
        accepted."""
        g = self.goal
        return proposes_request(text, g.kind, g.order_id, kind_text=self.records.outside_descriptions(text))

    def _refuse(self, proposal: str, line: str) -> tuple[str, bool]:
        """Say no to `proposal`, unless it states the goal's action in full: refusing that would
        contradict the goal, a simulator failure the episode is excluded for."""
        g = self.goal
        if g.outcome == "act" and g.action is not None and states_action(proposal, g.action, self.records):
            raise SimulatorError(f"the customer refused a proposal stating its goal {g.id} ({g.action.name}) "
                                 f"in full: {proposal[:300]!r}", cause=CONTRADICTION)
        return self._nudge(line)

    def _wrong_reason(self, text: str) -> str | None:
        """The customer's own reason (its words) when `text` proposes the goal's cancellation with
        another valid reason and not with the customer's; None otherwise."""
        g = self.goal
        if g.outcome != "act" or g.action is None or g.action.name != "cancel_pending_order":
            return None
        mine = str(g.action.arguments.get("reason", ""))
        t = text.lower()
        if mine not in REASONS or mine in t or not any(r in t for r in REASONS if r != mine):
            return None
        return self.bank.reason(g, mine)

    def _haggle(self) -> tuple[str, bool]:
        g = self.goal
        if g.haggle and self.haggled < len(g.haggle.demands):
            self.haggled += 1
            return self.bank.demand(g, self.haggled - 1), False
        if g.haggle and g.haggle.then == "accept":
            fallback = self.goals[self.k + 1] if self.k + 1 < len(self.goals) else None
            line = self.bank.after_haggle(g, fallback)
            self._advance(status="refused")
            if self.k < len(self.goals):
                self.revealed.update(self.goal.details)
            return line, False
        if g.haggle:
            return self._advance(prefix=self.bank.after_haggle(g, None), status="refused")
        return self._advance(prefix=self.bank.accept_refusal(), status="refused")

    def _nudge(self, line: str) -> tuple[str, bool]:
        self.stuck += 1
        if self.stuck > self.patience:
            return self._give_up()
        return line, False

    def _go_ahead(self) -> tuple[str, bool]:
        """Stand by the yes already given (a consent, unless the customer gives up instead)."""
        line, done = self._nudge(self.bank.go_ahead())
        self.agreed = self.confirmed  # giving up closes the goal, which clears it
        self.agreed_to = self._consent() if self.agreed else None
        return line, done

    def _consent(self) -> Consent:
        """What a yes to the current goal covers: the write that serves it (the forbidden one, for a
        refused request: the store then rejects it), on the goal's order."""
        g = self.goal
        tool = g.action.name if g.action is not None else KIND_TOOL.get(g.kind)
        order = g.order_id or (str(g.action.arguments["order_id"])
                               if g.action is not None and "order_id" in g.action.arguments else None)
        return Consent(tool, order)

    def _restate(self) -> str:
        g = self.goal
        missing = [self.bank.detail(g, k) for k in g.details if k not in self.revealed and k not in ("order_id",)]
        if g.order_id and "order_id" in g.details:
            missing.insert(0, self.bank.detail(g, "order_id"))
        return " ".join([self.bank.statement(g, next_request=False), *missing]).strip()

    def _identity_line(self, by_email: bool) -> str:
        c = self.task.customer
        if by_email and c.knows_email:
            if c.wrong_email and not self.wrong_email_given:
                self.wrong_email_given = True
                return self.bank.email(c.wrong_email)
            return self.bank.email(c.email)
        return self.bank.name_zip(c)

    def _answer(self, text: str, slots: list[str]) -> tuple[str, bool]:
        g = self.goal
        parts: list[str] = []
        c = self.task.customer
        if not self.authenticated and ("email" in slots or "name_zip" in slots):
            if self.wrong_email_given and R.says_not_found(text):
                parts.append(self.bank.corrected_email(c.email, asked=True))
            else:
                by_email = c.identify_by == "email" and ("email" in slots or "name_zip" not in slots)
                parts.append(self._identity_line(by_email))
        elif self.wrong_email_given and not self.authenticated and R.says_not_found(text):
            parts.append(self.bank.corrected_email(c.email, asked=False))
        facts: list[str] = []
        for slot in slots:
            if slot in ("email", "name_zip"):
                continue
            if slot in g.details and self.bank.detail(g, slot) not in facts:
                facts.append(self.bank.detail(g, slot))
                self.revealed.add(slot)
        if g.late and not self.late_given and R.asks_completeness(text):
            self.late_given = True
            facts.append(self.bank.late(g))
        parts += self.bank.arrange(facts)
        if not parts:
            if self.confirmed:
                return self._go_ahead()
            return self._nudge(self.bank.dont_know(self._restate()))
        return " ".join(parts), False
