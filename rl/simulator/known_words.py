"""The held-out evaluation customer in known words: held-out sentences made only of words the
training customer uses.

`heldout` (rl/simulator/heldout.py) keeps every sentence apart from the training wordings, and
about half of its sentences carry a word no training conversation holds ("I bought it by
accident.", "Can order #W... be delivered somewhere else?", "Yep, do it."; bench/unseen_words.py).
A model trained from random weights on our own conversations, as `cpu-tiny`'s is, has never been
shown what such a word means, so where a sentence's meaning rests on one, no recipe can read it; a
pretrained model (the paper's) reads it from pretraining. `KnownWordsCustomer` (`--user
heldout-known`) is the same held-out test in the language the model was taught: the training
customer's decisions (the very session of rl/simulator/scripted.py), new sentences, none equal to
or containing a training sentence or phrase, and every word one the training customers say (their
vocabulary) or a value of the task (ids, names, addresses, products), which the agent copies rather
than reads. tests/rl/simulator/test_known_words_customer.py checks both, against the training
customers as they are played.
"""

from __future__ import annotations

import random
import re

from rl.simulator.heldout import _ADDRESS, ORIGINAL, HeldOutBank, HeldOutCustomer
from rl.tasks.phrasing import address_text, order_ref
from rl.tasks.schema import Customer, Goal, Task

# 1: first version
KNOWN_WORDS_VERSION = "heldout-known-1"

GREETINGS = ["Hello there.", "Good morning to you.", "Hi there, I need some help today."]
YES = ["Correct, go ahead.", "Sure thing, please do.", "Okay, go ahead and do it."]
THANKS = ["Great, thank you very much.", "Perfect, that is all, thank you.", "That is great, thanks a lot."]
SHIFTS = ["Actually, stop - I do not want that after all.", "No wait, let me stop you there; forget about that one."]
DEMANDS = ["Is there really no way? {what}", "Can you really not do it for me? {what}",
           "I'm not okay with this. {what}"]
REASON_WORDS = {"no longer needed": "I have no more need for it.",
                "ordered by mistake": "It was a mistake to order it."}
REASON_SENTENCES = {"I no longer need it.": REASON_WORDS["no longer needed"],
                    "I ordered it by mistake.": REASON_WORDS["ordered by mistake"],
                    "They no longer need it.": "My friend has no more need for it."}

_CARD = re.compile(r"^my (?P<brand>.+) card ending in (?P<four>\d+)$")
_SWAPS = re.compile(r"^(?:Oh, one more: I'd also like to|I'd like to) (?:change|exchange) (?P<v>.+)\.$")
_RETURNS = re.compile(r"^(?:Oh, and I also want to return|I want to return) (?P<v>.+)\.$")
_PRODUCT = re.compile(r"^The (?P<v>.+)\.$")
_STATUS = re.compile(r"What is the current status of my order (?P<ref>\S+), and what is its tracking number\?$")
_COUNT = re.compile(r"How many (?P<p>.+) options do you have available right now\?$")
_FREE_REASON = re.compile(r"^The reason is: (?P<v>.+)\.$")


def payment_words(value: str) -> str:
    """A payment method as the training customer names it ('my Visa card ending in 1234'), reworded
    around the same values ('the Visa card with the number ending 1234')."""
    m = _CARD.match(value)
    if m:
        return f"the {m['brand']} card with the number ending {m['four']}"
    if value == "my PayPal account":
        return "PayPal"
    if value == "my gift card":
        return "the gift card on my account"
    if value.startswith("my gift card "):
        return "gift card " + value.removeprefix("my gift card ")
    if value.startswith("payment method "):
        return "the method " + value.removeprefix("payment method ")
    return value


def _swap_words(wishes: str) -> str:
    parts = []
    for wish in wishes.split("; and "):
        old, sep, new = wish.partition(" for the one with ")
        parts.append(f"{old} changed to the type with {new}" if sep else wish)
    return "; plus ".join(parts)


class KnownWordsBank(HeldOutBank):
    """`HeldOutBank`'s structure (values taken out of the script's sentences, identity sometimes
    volunteered, facts in reverse order) with sentences in the training customers' words."""

    def __init__(self, task: Task, seed: int) -> None:
        super().__init__(task, seed)
        # a stream of its own, so the held-out customer's draws are not this one's
        self.rng = random.Random(f"heldout-known:{seed}:{task.id}")
        self._greeting = self.rng.choice(GREETINGS)
        self._shift = self.rng.choice(SHIFTS)

    # ------------------------------------------------------------ goals

    def closing(self, task: Task) -> str:
        return "That is everything I needed from you."

    def _order(self, g: Goal) -> str:
        if g.order_id and "order_id" in g.upfront:
            return f"order {order_ref(g.order_id)}"
        return "an order I placed"

    def _request(self, g: Goal) -> str | None:
        o = self._order(g)
        pay = self._payment_value(g)
        if g.kind == "cancel" and g.outcome == "refuse" and "friend" in g.say:
            return f"My friend's order {order_ref(g.order_id or '')} - can you cancel that one also?"
        if g.kind == "return" and g.outcome == "refuse" and "payment" in g.upfront and pay:
            return f"I have some items from {o} to return, and the refund should go to {payment_words(pay)}."
        simple = {
            "cancel": f"Can you cancel {o} for me?",
            "modify_address": f"Can {o} be shipped to another address?",
            "modify_payment": f"Can the payment on {o} change to another method?",
            "modify_items": f"Can one of the items in {o} change to a different type?",
            "exchange": f"Something I got in {o} should be changed for a different type.",
            "return": f"There is something from {o} I would like to return.",
            "user_address": "I moved, so the default address on my account should change.",
        }
        if g.kind in simple:
            return simple[g.kind]
        if g.kind == "info":
            m = _STATUS.search(g.say)
            if m:
                return f"What is the status of order {m['ref']} today? I'd also need its tracking number."
            m = _COUNT.search(g.say)
            if m:
                return f"For the {m['p']}, how many options are there in stock now?"
        return None

    def statement(self, goal: Goal, next_request: bool) -> str:
        said = self._request(goal)
        if said is None:
            return goal.say  # free text from an imported or mined task: the task's own words
        if not next_request:
            return said
        return f"Then, {said}" if said.startswith("I") else f"Then, {said[0].lower()}{said[1:]}"

    # ------------------------------------------------------------ facts

    def detail(self, goal: Goal, slot: str) -> str:
        text = goal.details[slot]
        if slot == "order_id" and goal.order_id:
            return f"The order number is {order_ref(goal.order_id)}."
        if slot == "reason":
            if text in REASON_SENTENCES:
                return REASON_SENTENCES[text]
            m = _FREE_REASON.match(text)
            return f"Use {m['v']} for my reason." if m else text
        if slot == "payment":
            pay = self._payment_value(goal)
            if pay == ORIGINAL:
                return "For the refund, the original payment is fine."
            if pay is None:
                return text
            pay = payment_words(pay)
            if goal.kind == "modify_payment":
                return f"Charge it to {pay} instead."
            if goal.kind in ("modify_items", "exchange"):
                return f"Any price difference can go on {pay}."
            return f"The refund should go to {pay}."
        if slot == "address":
            a = goal.action.arguments if goal.action else {}
            m = _ADDRESS.match(text)
            addr = address_text(a) if {"address1", "city", "state", "zip", "country"} <= set(a) else \
                m["v"] if m else None
            if addr is None:
                return text
            return f"I now live at {addr}." if goal.kind == "user_address" else f"It should go to {addr} instead."
        if slot == "items":
            m = _SWAPS.match(text)
            if m:
                return f"What I need is {_swap_words(m['v'])}."
            m = _RETURNS.match(text)
            if m:
                return f"It's {m['v']} that I want to return."
        if slot == "product":
            m = _PRODUCT.match(text)
            if m:
                return f"It is the {m['v']}."
        return text

    def late(self, goal: Goal) -> str:
        assert goal.late is not None
        m = _SWAPS.match(goal.late)
        if m:
            return f"Wait, I forgot one: {_swap_words(m['v'])} also."
        m = _RETURNS.match(goal.late)
        if m:
            return f"Wait, I forgot: {m['v']} is part of the return also."
        return goal.late

    def reason(self, goal: Goal, reason: str) -> str:
        return self.detail(goal, "reason") if "reason" in goal.details else REASON_WORDS[reason]

    def demand(self, goal: Goal, i: int) -> str:
        if goal.kind == "cancel":
            what = "I need that order cancelled."
        else:
            pay = self._payment_value(goal)
            what = f"I need the refund on {payment_words(pay)}." if pay and pay != ORIGINAL else \
                "I need you to do this."
        return DEMANDS[i % len(DEMANDS)].format(what=what)

    def after_haggle(self, goal: Goal, fallback: Goal | None) -> str:
        if fallback is None:
            return "Fine, I'll leave it then."
        if fallback.kind == "return" and goal.kind == "cancel" and "items" in fallback.details:
            return "Okay, fine, a return is okay with me then. " + self.detail(fallback, "items")
        if fallback.kind == "return" and goal.kind == "return":
            return "Okay then, the refund can go to the original payment."
        return "Okay, then let's do this instead: " + self.statement(fallback, next_request=False)

    # ------------------------------------------------------------ identity

    def email(self, email: str) -> str:
        return f"The account email is {email}."

    def name_zip(self, c: Customer) -> str:
        if not c.knows_email:
            return f"I don't know my email. The account is under the name {c.first_name} {c.last_name}, " \
                   f"zip code {c.zip}."
        return f"This is {c.first_name} {c.last_name}; my zip is {c.zip}."

    def corrected_email(self, email: str, asked: bool) -> str:
        if asked:
            return f"Sorry, that was not right. It is {email}."
        return f"Wait, that was not right - the right one is {email}."

    # ------------------------------------------------------------ reactions

    def yes(self, rng: random.Random) -> str:
        return self.rng.choice(YES)

    def thanks(self, rng: random.Random) -> str:
        return self.rng.choice(THANKS)

    def go_ahead(self) -> str:
        return "Yes, you can go ahead with that."

    def cannot_be_done(self) -> str:
        return "Oh, okay, if you can't, then that is that."

    def give_up(self) -> str:
        return "No, let's just stop here then."

    def accept_refusal(self) -> str:
        return "Okay, I understand."

    def are_you_sure(self, restate: str) -> str:
        return f"Hmm, that is not right for me. {restate}"

    def wrong_reason(self, reason: str) -> str:
        return f"That is not my reason, actually. {reason}".strip()

    def not_wanted(self, restate: str) -> str:
        return f"Hmm, that's not it. {restate}"

    def dont_know(self, restate: str) -> str:
        return f"I can't tell you that, sorry. {restate}"


class KnownWordsCustomer(HeldOutCustomer):
    """Factory of held-out sessions in known words (the `UserSimulator` for `--user heldout-known`)."""

    name = "heldout-known"
    prompt_version = KNOWN_WORDS_VERSION
    bank = KnownWordsBank
