"""The held-out evaluation customer: the scripted customer's behaviour in words training never used.

`HeldOutCustomer` (`--user heldout`) plays a task's `Script` with the very session of the training
customer (rl/simulator/scripted.py: same goals, facts, shift triggers, haggling and refusal
outcome, stop rules, deterministic per (task, seed)), through `HeldOutBank`: other wordings of
requests, facts, shifts, haggling, confirmations, thanks and "I don't know"; its identity in other
formats (sometimes volunteered in the opening, unasked); and the facts of one answer in reverse
order. It words each goal from the goal's structure (kind, outcome, order, the action's arguments)
and takes the values - order ids, addresses, payment methods, item descriptions, reasons - out of
the script's sentences, so every value still appears verbatim and a model that copies values can
still act. No sentence it says contains a training sentence (tests/rl/simulator/test_heldout_customer.py
checks the two banks apart). Goals whose script sentences it does not recognise (free text of
imported or mined tasks, kind `other`) keep the task's own words: those are task data, not a
training phrasing.
"""

from __future__ import annotations

import random
import re

from rl.simulator.bank import Bank
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.phrasing import address_text, order_ref
from rl.tasks.schema import Customer, Goal, Task

# 4: reports what its yes covers (scripted-6); 3: a write spends the yes (scripted-5);
# 2: reports its consent like the scripted customer
HELDOUT_VERSION = "heldout-4"

GREETINGS = ["Hello there.", "Hey, hoping you can sort something out for me.", "Good day."]
YES = ["Yep, do it.", "Correct, go ahead.", "Sure thing, please do."]
THANKS = ["Wonderful, much appreciated.", "Awesome, thank you so much.", "Cheers, that helps."]
SHIFTS = ["Actually, scratch that - I don't want that anymore.",
          "Hold on, I've reconsidered; forget that request."]
DEMANDS = ["Is there really no way? {what}", "Come on, just this once? {what}", "I'm not happy about this. {what}"]
REASON_WORDS = {"no longer needed": "I don't need it anymore.", "ordered by mistake": "I bought it by accident."}
REASON_SENTENCES = {"I no longer need it.": REASON_WORDS["no longer needed"],
                    "I ordered it by mistake.": REASON_WORDS["ordered by mistake"],
                    "They no longer need it.": "My friend doesn't need it anymore."}
ORIGINAL = "original payment method"  # the fallback of a refused refund, named without a record

_CARD = re.compile(r"^my (?P<brand>.+) card ending in (?P<four>\d+)$")
_PAYMENT = [re.compile(p) for p in (r"^Please use (?P<v>.+)\.$", r"^Use (?P<v>.+) for any price difference\.$",
                                    r"^Please refund (?P<v>.+)\.$")]
_ADDRESS = re.compile(r"^(?:Please ship it to|My new address is|The new address is) (?P<v>.+)\.$")
_SWAPS = re.compile(r"^(?:Oh, one more: I'd also like to|I'd like to) (?:change|exchange) (?P<v>.+)\.$")
_RETURNS = re.compile(r"^(?:Oh, and I also want to return|I want to return) (?P<v>.+)\.$")
_PRODUCT = re.compile(r"^The (?P<v>.+)\.$")
_STATUS = re.compile(r"What is the current status of my order (?P<ref>\S+), and what is its tracking number\?$")
_COUNT = re.compile(r"How many (?P<p>.+) options do you have available right now\?$")
_FREE_REASON = re.compile(r"^The reason is: (?P<v>.+)\.$")


def payment_words(value: str) -> str:
    """A payment method as the training customer names it ('my Visa card ending in 1234'), reworded
    around the same values ('the Visa card whose last four digits are 1234')."""
    m = _CARD.match(value)
    if m:
        return f"the {m['brand']} card whose last four digits are {m['four']}"
    if value == "my PayPal account":
        return "PayPal"
    if value == "my gift card":
        return "the gift card I have on file"
    if value.startswith("my gift card "):
        return "gift card " + value.removeprefix("my gift card ")
    if value.startswith("payment method "):
        return "the method " + value.removeprefix("payment method ")
    return value


def _swap_words(wishes: str) -> str:
    parts = []
    for wish in wishes.split("; and "):
        old, sep, new = wish.partition(" for the one with ")
        parts.append(f"{old} replaced by the variant with {new}" if sep else wish)
    return "; plus ".join(parts)


class HeldOutBank(Bank):
    def __init__(self, task: Task, seed: int) -> None:
        self.task = task
        self.rng = random.Random(f"heldout:{seed}:{task.id}")
        # Volunteering the identity saves the agent a turn; a shift due after some agent turns would
        # then come after the customer confirmed the goal it drops, so those customers wait to be asked.
        first = task.script.goals[0]
        self._volunteers = self.rng.random() < 1 / 3 and not (first.shift and first.shift.trigger == "agent_turn")
        self._greeting = self.rng.choice(GREETINGS)
        self._shift = self.rng.choice(SHIFTS)

    # ------------------------------------------------------------ goals

    def opening(self, task: Task) -> str:
        return f"{self._greeting} {self.statement(task.script.goals[0], next_request=False)}"

    def closing(self, task: Task) -> str:
        return "That covers everything I needed, bye!"

    def _order(self, g: Goal) -> str:
        if g.order_id and "order_id" in g.upfront:
            return f"order {order_ref(g.order_id)}"
        return "an order of mine"

    def _request(self, g: Goal) -> str | None:
        """The goal in held-out words, or None when the script's words are not the generator's."""
        o = self._order(g)
        pay = self._payment_value(g)
        if g.kind == "cancel" and g.outcome == "refuse" and "friend" in g.say:
            return f"My friend's order {order_ref(g.order_id or '')} - could you cancel that one as well?"
        if g.kind == "return" and g.outcome == "refuse" and "payment" in g.upfront and pay:
            return f"Some things from {o} are going back, and the money should land on {payment_words(pay)}."
        simple = {
            "cancel": f"Could you cancel {o} for me?",
            "modify_address": f"Can {o} be delivered somewhere else?",
            "modify_payment": f"Can the payment on {o} be switched to something else?",
            "modify_items": f"Could one of the items in {o} be switched to a different variant?",
            "exchange": f"Something I received in {o} should be swapped for a different variant.",
            "return": f"I'm hoping to send back something from {o}.",
            "user_address": "I've relocated, so the default address on my account should change.",
        }
        if g.kind in simple:
            return simple[g.kind]
        if g.kind == "info":
            m = _STATUS.search(g.say)
            if m:
                return f"Where is order {m['ref']} at the moment? I'd also need its tracking number."
            m = _COUNT.search(g.say)
            if m:
                return f"For the {m['p']}, how many variants can I buy at the moment?"
        return None

    def statement(self, goal: Goal, next_request: bool) -> str:
        said = self._request(goal)
        if said is None:
            return goal.say  # free text from an imported or mined task: the task's own words
        if not next_request:
            return said
        return f"Separately, {said}" if said.startswith("I") else f"Separately, {said[0].lower()}{said[1:]}"

    def shift(self, dropped: Goal, nxt: Goal) -> str:
        said = self._request(nxt)
        return f"{self._shift} {said if said is not None else nxt.say}"

    # ------------------------------------------------------------ facts

    def _payment_value(self, g: Goal) -> str | None:
        text = g.details.get("payment", "")
        if ORIGINAL in text:
            return ORIGINAL
        for p in _PAYMENT:
            m = p.match(text)
            if m:
                return m["v"]
        return None

    def detail(self, goal: Goal, slot: str) -> str:
        text = goal.details[slot]
        if slot == "order_id" and goal.order_id:
            return f"The order number is {order_ref(goal.order_id)}."
        if slot == "reason":
            if text in REASON_SENTENCES:
                return REASON_SENTENCES[text]
            m = _FREE_REASON.match(text)
            return f"Put down {m['v']} as my reason." if m else text
        if slot == "payment":
            pay = self._payment_value(goal)
            if pay == ORIGINAL:
                return "Whatever I originally paid with is fine for the refund."
            if pay is None:
                return text
            pay = payment_words(pay)
            if goal.kind == "modify_payment":
                return f"Put it on {pay} instead."
            if goal.kind in ("modify_items", "exchange"):
                return f"Any price difference can go through {pay}."
            return f"The money should go back to {pay}."
        if slot == "address":
            a = goal.action.arguments if goal.action else {}
            m = _ADDRESS.match(text)
            addr = address_text(a) if {"address1", "city", "state", "zip", "country"} <= set(a) else \
                m["v"] if m else None
            if addr is None:
                return text
            return f"I now live at {addr}." if goal.kind == "user_address" else f"Send it to {addr} instead."
        if slot == "items":
            m = _SWAPS.match(text)
            if m:
                return f"What I need is {_swap_words(m['v'])}."
            m = _RETURNS.match(text)
            if m:
                return f"It's {m['v']} that I'm sending back."
        if slot == "product":
            m = _PRODUCT.match(text)
            if m:
                return f"I mean the {m['v']}."
        return text

    def late(self, goal: Goal) -> str:
        assert goal.late is not None
        m = _SWAPS.match(goal.late)
        if m:
            return f"Wait, I forgot one: {_swap_words(m['v'])} too."
        m = _RETURNS.match(goal.late)
        if m:
            return f"Hold on, {m['v']} needs to go back as well."
        return goal.late

    def reason(self, goal: Goal, reason: str) -> str:
        return self.detail(goal, "reason") if "reason" in goal.details else REASON_WORDS[reason]

    def demand(self, goal: Goal, i: int) -> str:
        if goal.kind == "cancel":
            what = "I need that order cancelled."
        else:
            pay = self._payment_value(goal)
            what = f"I need the refund on {payment_words(pay)}." if pay and pay != ORIGINAL else "I need this done."
        return DEMANDS[i % len(DEMANDS)].format(what=what)

    def after_haggle(self, goal: Goal, fallback: Goal | None) -> str:
        if fallback is None:
            return "Fine, I'll leave it then."
        if fallback.kind == "return" and goal.kind == "cancel" and "items" in fallback.details:
            return "Okay, fine, I'll send it back instead. " + self.detail(fallback, "items")
        if fallback.kind == "return" and goal.kind == "return":
            return "Okay then, refund whatever I originally paid with."
        return "Okay, then let's do this instead: " + self.statement(fallback, next_request=False)

    # ------------------------------------------------------------ identity

    def email(self, email: str) -> str:
        return f"The account email is {email}."

    def name_zip(self, c: Customer) -> str:
        if not c.knows_email:
            return f"No idea which email I used. It's under the name {c.first_name} {c.last_name}, zip code {c.zip}."
        return f"This is {c.first_name} {c.last_name}; my postal code is {c.zip}."

    def corrected_email(self, email: str, asked: bool) -> str:
        if asked:
            return f"Oops, I mistyped that. Try {email}."
        return f"Ah wait, that was a typo - the right one is {email}."

    def volunteers_identity(self) -> bool:
        return self._volunteers

    # ------------------------------------------------------------ reactions

    def yes(self, rng: random.Random) -> str:
        return self.rng.choice(YES)

    def thanks(self, rng: random.Random) -> str:
        return self.rng.choice(THANKS)

    def go_ahead(self) -> str:
        return "You have my OK, go for it."

    def cannot_be_done(self) -> str:
        return "Oh well, if it won't work, it won't work."

    def give_up(self) -> str:
        return "Forget about it, this isn't going anywhere."

    def accept_refusal(self) -> str:
        return "Understood, no problem."

    def are_you_sure(self, restate: str) -> str:
        return f"Hmm, that doesn't sound right to me. {restate}"

    def wrong_reason(self, reason: str) -> str:
        return f"That's not why, actually. {reason}".strip()

    def not_wanted(self, restate: str) -> str:
        return f"Hmm, that's not it. {restate}"

    def dont_know(self, restate: str) -> str:
        return f"No clue about that, sorry. {restate}"

    def arrange(self, facts: list[str]) -> list[str]:
        return facts[::-1]


class HeldOutCustomer(ScriptedCustomer):
    """Factory of held-out sessions (the `UserSimulator` for `--user heldout`): the scripted
    customer's decisions in the held-out bank's words."""

    name = "heldout"
    prompt_version = HELDOUT_VERSION
    bank = HeldOutBank
