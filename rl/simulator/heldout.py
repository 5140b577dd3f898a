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


# Every sentence of the held-out bank, as templates of its values: a bank that words the same
# decisions otherwise (rl/simulator/known_words.py) replaces these and the lists above, not the logic.
WORDS = {
    "closing": "That covers everything I needed, bye!",
    "an_order": "an order of mine",
    "next_request": "Separately, ",
    "friend_cancel": "My friend's order {ref} - could you cancel that one as well?",
    "refused_refund": "Some things from {o} are going back, and the money should land on {pay}.",
    "cancel": "Could you cancel {o} for me?",
    "modify_address": "Can {o} be delivered somewhere else?",
    "modify_payment": "Can the payment on {o} be switched to something else?",
    "modify_items": "Could one of the items in {o} be switched to a different variant?",
    "exchange": "Something I received in {o} should be swapped for a different variant.",
    "return": "I'm hoping to send back something from {o}.",
    "user_address": "I've relocated, so the default address on my account should change.",
    "status": "Where is order {ref} at the moment? I'd also need its tracking number.",
    "count": "For the {p}, how many variants can I buy at the moment?",
    "order_number": "The order number is {ref}.",
    "free_reason": "Put down {v} as my reason.",
    "refund_original": "Whatever I originally paid with is fine for the refund.",
    "pay_instead": "Put it on {pay} instead.",
    "pay_difference": "Any price difference can go through {pay}.",
    "pay_refund": "The money should go back to {pay}.",
    "new_home": "I now live at {addr}.",
    "ship_to": "Send it to {addr} instead.",
    "swaps": "What I need is {v}.",
    "returns": "It's {v} that I'm sending back.",
    "product": "I mean the {v}.",
    "late_swaps": "Wait, I forgot one: {v} too.",
    "late_returns": "Hold on, {v} needs to go back as well.",
    "demand_cancel": "I need that order cancelled.",
    "demand_refund": "I need the refund on {pay}.",
    "demand_other": "I need this done.",
    "leave_it": "Fine, I'll leave it then.",
    "return_instead": "Okay, fine, I'll send it back instead. ",
    "refund_original_instead": "Okay then, refund whatever I originally paid with.",
    "do_instead": "Okay, then let's do this instead: ",
    "email": "The account email is {email}.",
    "name_zip_no_email": "No idea which email I used. It's under the name {first} {last}, zip code {zip}.",
    "name_zip": "This is {first} {last}; my postal code is {zip}.",
    "corrected_asked": "Oops, I mistyped that. Try {email}.",
    "corrected": "Ah wait, that was a typo - the right one is {email}.",
    "go_ahead": "You have my OK, go for it.",
    "cannot_be_done": "Oh well, if it won't work, it won't work.",
    "give_up": "Forget about it, this isn't going anywhere.",
    "accept_refusal": "Understood, no problem.",
    "are_you_sure": "Hmm, that doesn't sound right to me. {restate}",
    "wrong_reason": "That's not why, actually. {reason}",
    "not_wanted": "Hmm, that's not it. {restate}",
    "dont_know": "No clue about that, sorry. {restate}",
    # payment methods and item swaps, reworded around the training customer's values
    "card": "the {brand} card whose last four digits are {four}",
    "paypal": "PayPal",
    "gift_card": "the gift card I have on file",
    "gift_card_id": "gift card {id}",
    "method_id": "the method {id}",
    "swap": "{old} replaced by the variant with {new}",
}


class HeldOutBank(Bank):
    # the bank's words (a subclass replaces these); REASON_WORDS maps a tool reason to its sentence,
    # REASON_SENTENCES a training reason sentence to the bank's
    GREETINGS, YES, THANKS, SHIFTS, DEMANDS = GREETINGS, YES, THANKS, SHIFTS, DEMANDS
    REASON_WORDS, REASON_SENTENCES, WORDS = REASON_WORDS, REASON_SENTENCES, WORDS
    stream = "heldout"  # names the bank's random stream

    def __init__(self, task: Task, seed: int) -> None:
        self.task = task
        # which customers volunteer their identity is drawn on the held-out stream whatever the
        # words, so every held-out bank makes the same decisions
        volunteer_rng = random.Random(f"heldout:{seed}:{task.id}")
        # Volunteering the identity saves the agent a turn; a shift due after some agent turns would
        # then come after the customer confirmed the goal it drops, so those customers wait to be asked.
        first = task.script.goals[0]
        self._volunteers = volunteer_rng.random() < 1 / 3 and not (first.shift and first.shift.trigger == "agent_turn")
        self.rng = volunteer_rng if self.stream == "heldout" else random.Random(f"{self.stream}:{seed}:{task.id}")
        self._greeting = self.rng.choice(self.GREETINGS)
        self._shift = self.rng.choice(self.SHIFTS)

    def payment_words(self, value: str) -> str:
        """A payment method as the training customer names it ('my Visa card ending in 1234'), reworded
        around the same values ('the Visa card whose last four digits are 1234')."""
        w = self.WORDS
        m = _CARD.match(value)
        if m:
            return w["card"].format(brand=m["brand"], four=m["four"])
        if value == "my PayPal account":
            return w["paypal"]
        if value == "my gift card":
            return w["gift_card"]
        if value.startswith("my gift card "):
            return w["gift_card_id"].format(id=value.removeprefix("my gift card "))
        if value.startswith("payment method "):
            return w["method_id"].format(id=value.removeprefix("payment method "))
        return value

    def _swap_words(self, wishes: str) -> str:
        parts = []
        for wish in wishes.split("; and "):
            old, sep, new = wish.partition(" for the one with ")
            parts.append(self.WORDS["swap"].format(old=old, new=new) if sep else wish)
        return "; plus ".join(parts)

    # ------------------------------------------------------------ goals

    def opening(self, task: Task) -> str:
        return f"{self._greeting} {self.statement(task.script.goals[0], next_request=False)}"

    def closing(self, task: Task) -> str:
        return self.WORDS["closing"]

    def _order(self, g: Goal) -> str:
        if g.order_id and "order_id" in g.upfront:
            return f"order {order_ref(g.order_id)}"
        return self.WORDS["an_order"]

    def _request(self, g: Goal) -> str | None:
        """The goal in held-out words, or None when the script's words are not the generator's."""
        w = self.WORDS
        o = self._order(g)
        pay = self._payment_value(g)
        if g.kind == "cancel" and g.outcome == "refuse" and "friend" in g.say:
            return w["friend_cancel"].format(ref=order_ref(g.order_id or ""))
        if g.kind == "return" and g.outcome == "refuse" and "payment" in g.upfront and pay:
            return w["refused_refund"].format(o=o, pay=self.payment_words(pay))
        if g.kind in ("cancel", "modify_address", "modify_payment", "modify_items", "exchange", "return",
                      "user_address"):
            return w[g.kind].format(o=o)
        if g.kind == "info":
            m = _STATUS.search(g.say)
            if m:
                return w["status"].format(ref=m["ref"])
            m = _COUNT.search(g.say)
            if m:
                return w["count"].format(p=m["p"])
        return None

    def statement(self, goal: Goal, next_request: bool) -> str:
        said = self._request(goal)
        if said is None:
            return goal.say  # free text from an imported or mined task: the task's own words
        if not next_request:
            return said
        lead = self.WORDS["next_request"]
        return f"{lead}{said}" if said.startswith("I") else f"{lead}{said[0].lower()}{said[1:]}"

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
        w = self.WORDS
        text = goal.details[slot]
        if slot == "order_id" and goal.order_id:
            return w["order_number"].format(ref=order_ref(goal.order_id))
        if slot == "reason":
            if text in self.REASON_SENTENCES:
                return self.REASON_SENTENCES[text]
            m = _FREE_REASON.match(text)
            return w["free_reason"].format(v=m["v"]) if m else text
        if slot == "payment":
            pay = self._payment_value(goal)
            if pay == ORIGINAL:
                return w["refund_original"]
            if pay is None:
                return text
            pay = self.payment_words(pay)
            if goal.kind == "modify_payment":
                return w["pay_instead"].format(pay=pay)
            if goal.kind in ("modify_items", "exchange"):
                return w["pay_difference"].format(pay=pay)
            return w["pay_refund"].format(pay=pay)
        if slot == "address":
            a = goal.action.arguments if goal.action else {}
            m = _ADDRESS.match(text)
            addr = address_text(a) if {"address1", "city", "state", "zip", "country"} <= set(a) else \
                m["v"] if m else None
            if addr is None:
                return text
            return w["new_home" if goal.kind == "user_address" else "ship_to"].format(addr=addr)
        if slot == "items":
            m = _SWAPS.match(text)
            if m:
                return w["swaps"].format(v=self._swap_words(m["v"]))
            m = _RETURNS.match(text)
            if m:
                return w["returns"].format(v=m["v"])
        if slot == "product":
            m = _PRODUCT.match(text)
            if m:
                return w["product"].format(v=m["v"])
        return text

    def late(self, goal: Goal) -> str:
        assert goal.late is not None
        m = _SWAPS.match(goal.late)
        if m:
            return self.WORDS["late_swaps"].format(v=self._swap_words(m["v"]))
        m = _RETURNS.match(goal.late)
        if m:
            return self.WORDS["late_returns"].format(v=m["v"])
        return goal.late

    def reason(self, goal: Goal, reason: str) -> str:
        return self.detail(goal, "reason") if "reason" in goal.details else self.REASON_WORDS[reason]

    def demand(self, goal: Goal, i: int) -> str:
        w = self.WORDS
        if goal.kind == "cancel":
            what = w["demand_cancel"]
        else:
            pay = self._payment_value(goal)
            what = w["demand_refund"].format(pay=self.payment_words(pay)) if pay and pay != ORIGINAL else \
                w["demand_other"]
        return self.DEMANDS[i % len(self.DEMANDS)].format(what=what)

    def after_haggle(self, goal: Goal, fallback: Goal | None) -> str:
        w = self.WORDS
        if fallback is None:
            return w["leave_it"]
        if fallback.kind == "return" and goal.kind == "cancel" and "items" in fallback.details:
            return w["return_instead"] + self.detail(fallback, "items")
        if fallback.kind == "return" and goal.kind == "return":
            return w["refund_original_instead"]
        return w["do_instead"] + self.statement(fallback, next_request=False)

    # ------------------------------------------------------------ identity

    def email(self, email: str) -> str:
        return self.WORDS["email"].format(email=email)

    def name_zip(self, c: Customer) -> str:
        key = "name_zip" if c.knows_email else "name_zip_no_email"
        return self.WORDS[key].format(first=c.first_name, last=c.last_name, zip=c.zip)

    def corrected_email(self, email: str, asked: bool) -> str:
        return self.WORDS["corrected_asked" if asked else "corrected"].format(email=email)

    def volunteers_identity(self) -> bool:
        return self._volunteers

    # ------------------------------------------------------------ reactions

    def yes(self, rng: random.Random) -> str:
        return self.rng.choice(self.YES)

    def thanks(self, rng: random.Random) -> str:
        return self.rng.choice(self.THANKS)

    def go_ahead(self) -> str:
        return self.WORDS["go_ahead"]

    def cannot_be_done(self) -> str:
        return self.WORDS["cannot_be_done"]

    def give_up(self) -> str:
        return self.WORDS["give_up"]

    def accept_refusal(self) -> str:
        return self.WORDS["accept_refusal"]

    def are_you_sure(self, restate: str) -> str:
        return self.WORDS["are_you_sure"].format(restate=restate)

    def wrong_reason(self, reason: str) -> str:
        return self.WORDS["wrong_reason"].format(reason=reason).strip()

    def not_wanted(self, restate: str) -> str:
        return self.WORDS["not_wanted"].format(restate=restate)

    def dont_know(self, restate: str) -> str:
        return self.WORDS["dont_know"].format(restate=restate)

    def arrange(self, facts: list[str]) -> list[str]:
        return facts[::-1]


class HeldOutCustomer(ScriptedCustomer):
    """Factory of held-out sessions (the `UserSimulator` for `--user heldout`): the scripted
    customer's decisions in the held-out bank's words."""

    name = "heldout"
    prompt_version = HELDOUT_VERSION
    bank = HeldOutBank
