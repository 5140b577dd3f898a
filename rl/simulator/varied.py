"""The varied training customer: the training customer's sentences, each said in one of several wordings.

`VariedCustomer` (`--user varied`) plays the training customer's sessions (rl/simulator/scripted.py:
same goals, facts, decisions) through `VariedBank`, which takes every line the training bank would
say, splits it into sentences and replaces each sentence that a rule of `RULES` recognises by one
of that rule's wordings, drawn per session (deterministic per task and seed). The wordings keep
every value verbatim (order ids, addresses, payment methods, items, names, emails), so a model that
copies values can still act, and the original sentence is always one of them.

Why: a tiny model trained on one phrasing per decision learns those phrases, not the words that
carry the request, and fails with a customer who words the same request otherwise (issue 23: 32.4%
with the training customer, 6.7% with the held-out one). Training on several wordings of each
decision is the cheapest way to make it read for what matters. These wordings are training
wordings: the held-out evaluation customer (rl/simulator/heldout.py) must stay apart from them,
which tests/rl/simulator/test_varied_customer.py checks sentence by sentence.
"""

from __future__ import annotations

import random
import re

from rl.simulator.bank import TrainingBank
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.schema import Customer, Goal, Task

# 4: reports what its yes covers (scripted-6); 3: a write spends the yes (scripted-5);
# 2: reports its consent like the scripted customer
VARIED_VERSION = "varied-4"

_O = r"(?P<o>my order \S+|one of my orders)"
# (a training sentence, matched whole) -> its wordings; {name} is the match's group of that name.
RULES: list[tuple[str, list[str]]] = [
    # greetings, closing
    (r"Hi!", ["Hi!", "Hello!", "Hi there.", "Hello, I need some help.", "Good morning."]),
    (r"Thanks, that's all I needed\.", ["Thanks, that's all I needed.", "That's everything, thank you.",
                                       "Thank you, that was all.", "Great, that's all for today."]),
    # goals
    (rf"I'd like to cancel {_O}\.", ["I'd like to cancel {o}.", "Please cancel {o}.", "Can you cancel {o}?",
                                     "I want {o} cancelled.", "I need {o} cancelled, please.",
                                     "I would like {o} to be cancelled."]),
    (r"I want to cancel my order (?P<ref>\S+)\.", ["I want to cancel my order {ref}.", "Please cancel my order {ref}.",
                                                  "My order {ref} should be cancelled."]),
    (rf"I need to change the shipping address of {_O}\.",
     ["I need to change the shipping address of {o}.", "The shipping address of {o} needs to change.",
      "I want {o} shipped to a different address.", "Can you update the address on {o}?",
      "Please change the delivery address of {o}.", "I'd like {o} to go to a new address."]),
    (rf"I want to return something from {_O}\.",
     ["I want to return something from {o}.", "I'd like to return an item from {o}.",
      "Can I return something from {o}?", "I need to return part of {o}.",
      "Please help me return something I got in {o}."]),
    (rf"I want to pay for {_O} with a different payment method\.",
     ["I want to pay for {o} with a different payment method.", "I'd like to change the payment method of {o}.",
      "Can I use another payment method for {o}?"]),
    (rf"I want to (?P<verb>change|exchange) an item in {_O}\.",
     ["I want to {verb} an item in {o}.", "I'd like to {verb} something in {o}.",
      "Can I {verb} one of the items in {o}?"]),
    (r"I moved and need to update my default address\.",
     ["I moved and need to update my default address.", "I have moved, so my default address needs updating.",
      "My address changed and my account's default address should be updated."]),
    (r"What is the current status of my order (?P<ref>\S+), and what is its tracking number\?",
     ["What is the current status of my order {ref}, and what is its tracking number?",
      "Can you tell me the status of my order {ref} and its tracking number?",
      "What's the status of my order {ref}? I also want the tracking number.",
      "I'd like to know the status and the tracking number of my order {ref}.",
      "Has my order {ref} shipped yet? Please tell me its status and tracking number."]),
    (r"How many (?P<p>.+) options do you have available right now\?",
     ["How many {p} options do you have available right now?", "How many {p} options are available?",
      "Can you tell me how many {p} options are in stock?"]),
    # goal shifts, next requests
    (r"Actually, wait - I've changed my mind, please don't do that\.",
     ["Actually, wait - I've changed my mind, please don't do that.", "Wait, I changed my mind, don't do that.",
      "Sorry, please don't do that after all.", "No, stop, I've decided against that."]),
    (r"Hmm, on second thought, let's not do that\.",
     ["Hmm, on second thought, let's not do that.", "On second thought, please don't.",
      "Let's not do that after all."]),
    # facts
    (r"It's order (?P<ref>\S+)\.", ["It's order {ref}.", "The order is {ref}.", "It is order {ref}.",
                                    "My order id is {ref}."]),
    (r"Please ship it to (?P<v>.+)\.", ["Please ship it to {v}.", "Ship it to {v}.", "The new address is {v}.",
                                        "It should go to {v}.", "Deliver it to {v}, please."]),
    (r"My new address is (?P<v>.+)\.", ["My new address is {v}.", "I live at {v} now.",
                                        "Please update it to {v}."]),
    (r"Please use (?P<v>.+)\.", ["Please use {v}.", "I'd like to use {v}.", "Let's go with {v}."]),
    (r"Use (?P<v>.+) for any price difference\.", ["Use {v} for any price difference.",
                                                   "Charge any price difference to {v}."]),
    (r"Please refund (?P<v>.+)\.", ["Please refund {v}.", "Refund it to {v}, please.",
                                    "I want the refund to go to {v}."]),
    (r"I want to return (?P<v>.+)\.", ["I want to return {v}.", "I'd like to return {v}.",
                                       "The item to return is {v}."]),
    (r"I'd like to (?P<verb>change|exchange) (?P<v>.+)\.", ["I'd like to {verb} {v}.", "I want to {verb} {v}."]),
    (r"I no longer need it\.", ["I no longer need it.", "I do not need it any longer.", "It's no longer needed.",
                                "Turns out I no longer need it."]),
    (r"I ordered it by mistake\.", ["I ordered it by mistake.", "It was ordered by mistake.",
                                    "I placed that order by mistake.", "That order was a mistake."]),
    # identity
    (r"My email is (?P<e>\S+)\.", ["My email is {e}.", "My email address is {e}.", "You can find me under {e}."]),
    (r"My name is (?P<f>\S+) (?P<l>\S+) and my zip code is (?P<z>\d{5})\.",
     ["My name is {f} {l} and my zip code is {z}.", "I'm {f} {l}, zip code {z}.",
      "I am {f} {l} and my zip is {z}.", "My name's {f} {l}, zip {z}."]),
    (r"I don't remember my email, but my name is (?P<f>\S+) (?P<l>\S+) and my zip code is (?P<z>\d{5})\.",
     ["I don't remember my email, but my name is {f} {l} and my zip code is {z}.",
      "I forgot my email. My name is {f} {l} and my zip code is {z}.",
      "Not sure about the email, but I'm {f} {l}, zip code {z}."]),
    # reactions
    (r"Yes, please go ahead\.", ["Yes, please go ahead.", "Yes, do that.", "Yes please, go ahead."]),
    (r"Yes, that's right\.", ["Yes, that's right.", "Yeah, that's correct."]),
    (r"Yes, I confirm\.", ["Yes, I confirm.", "Yes, confirmed."]),
    (r"Great, thank you\.", ["Great, thank you.", "Thank you very much."]),
    (r"Perfect, thanks\.", ["Perfect, thanks.", "Great, thanks a lot."]),
    (r"Yes, please go ahead with it\.", ["Yes, please go ahead with it.", "Yes, go ahead and do it."]),
    (r"I see, that can't be done then\.", ["I see, that can't be done then.", "Okay, so that is not possible."]),
    (r"Never mind, let's leave it\.", ["Never mind, let's leave it.", "Forget it, let's stop here."]),
    (r"I see, okay\.", ["I see, okay.", "Alright, I understand."]),
    (r"Are you sure\?", ["Are you sure?", "Really?", "Is that right?"]),
    (r"No, that's not the reason\.", ["No, that's not the reason.", "That's not my reason."]),
    (r"No, that's not what I want\.", ["No, that's not what I want.", "No, I want something else."]),
    (r"I'm not sure I know that\.", ["I'm not sure I know that.", "I don't have that information."]),
    # haggling
    (r"I really need to (?P<w>.+)\.", ["I really need to {w}.", "I must {w}.", "It's important that I {w}."]),
    (r"Please, can't you make an exception\?", ["Please, can't you make an exception?",
                                                 "Can't you make an exception for me?"]),
    (r"This is ridiculous\.", ["This is ridiculous.", "This is unfair."]),
    (r"I insist, I want to (?P<w>.+)\.", ["I insist, I want to {w}.", "I still want to {w}."]),
    (r"Then I'll just return it\.", ["Then I'll just return it.", "In that case I'll return it."]),
]
_RULES = [(re.compile(p), words) for p, words in RULES]
# Lead-ins the training customer puts before a request (its next request, or the one it shifts to).
LEADS: dict[str, list[str]] = {"One more thing: ": ["One more thing: ", "Also, ", "And another thing: "],
                               "Instead, ": ["Instead, ", "Rather, ", "What I want instead: "]}
_SPLIT = re.compile(r"(?<=[.?!])\s+")


def wordings(sentence: str) -> list[str]:
    """Every wording of one training sentence (the sentence itself when no rule knows it)."""
    lead = next((k for k in LEADS if sentence.startswith(k)), "")
    body = sentence[len(lead):]
    if lead:
        body = body[:1].upper() + body[1:]
    for pattern, words in _RULES:
        m = pattern.fullmatch(body)
        if m:
            out = [w.format(**m.groupdict()) for w in words]
            break
    else:
        out = [body]
    if not lead:
        return out
    return [f"{ld}{_lower_first(w)}" for ld in LEADS[lead] for w in out]


def _lower_first(s: str) -> str:
    return s if s.startswith(("I ", "I'")) else s[:1].lower() + s[1:]


class VariedBank(TrainingBank):
    """The training bank's lines, each sentence in a wording drawn from `choices` (`wordings`)."""

    tag = "varied"  # names the session's random stream
    choices = staticmethod(wordings)

    def __init__(self, task: Task, seed: int) -> None:
        self.rng = random.Random(f"{self.tag}:{seed}:{task.id}")

    def vary(self, line: str) -> str:
        return " ".join(self.rng.choice(self.choices(s)) for s in _SPLIT.split(line.strip()) if s)

    def opening(self, task: Task) -> str:
        return self.vary(super().opening(task))

    def closing(self, task: Task) -> str:
        return self.vary(super().closing(task))

    def statement(self, goal: Goal, next_request: bool) -> str:
        return self.vary(super().statement(goal, next_request))

    def shift(self, dropped: Goal, nxt: Goal) -> str:
        return self.vary(super().shift(dropped, nxt))

    def detail(self, goal: Goal, slot: str) -> str:
        return self.vary(super().detail(goal, slot))

    def late(self, goal: Goal) -> str:
        return self.vary(super().late(goal))

    def reason(self, goal: Goal, reason: str) -> str:
        return self.vary(super().reason(goal, reason))

    def demand(self, goal: Goal, i: int) -> str:
        return self.vary(super().demand(goal, i))

    def after_haggle(self, goal: Goal, fallback: Goal | None) -> str:
        return self.vary(super().after_haggle(goal, fallback))

    def email(self, email: str) -> str:
        return self.vary(super().email(email))

    def name_zip(self, c: Customer) -> str:
        return self.vary(super().name_zip(c))

    def yes(self, rng: random.Random) -> str:
        return self.vary(super().yes(rng))

    def thanks(self, rng: random.Random) -> str:
        return self.vary(super().thanks(rng))

    def go_ahead(self) -> str:
        return self.vary(super().go_ahead())

    def cannot_be_done(self) -> str:
        return self.vary(super().cannot_be_done())

    def give_up(self) -> str:
        return self.vary(super().give_up())

    def accept_refusal(self) -> str:
        return self.vary(super().accept_refusal())

    def are_you_sure(self, restate: str) -> str:
        return self.vary(super().are_you_sure(restate))

    def wrong_reason(self, reason: str) -> str:
        return self.vary(super().wrong_reason(reason))

    def not_wanted(self, restate: str) -> str:
        return self.vary(super().not_wanted(restate))

    def dont_know(self, restate: str) -> str:
        return self.vary(super().dont_know(restate))


class VariedCustomer(ScriptedCustomer):
    """Factory of varied training sessions (the `UserSimulator` for `--user varied`)."""

    name = "varied"
    prompt_version = VARIED_VERSION
    bank = VariedBank
