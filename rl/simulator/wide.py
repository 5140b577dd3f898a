"""The wide training customer: the varied customer with many more wordings of each sentence.

`WideCustomer` (`--user wide`) plays the training customer's sessions (rl/simulator/scripted.py:
same goals, facts, decisions) through `WideBank`: every sentence the varied customer
(rl/simulator/varied.py) would say is drawn from that sentence's varied wordings plus the wider
ones of `WIDE` (other verbs, question and statement forms, other ways to name an order), and a
request or fact may open with a filler sentence ("Okay."). Values stay verbatim.

Why: the tiny model's cold start reads the varied customer's few wordings per decision as fixed
templates (session 34: held out, "Could you cancel ... for me?" is answered "Which items would you
like to change?"), so its held-out reading is a third of its training-style one and GRPO's gain
held out is a third of its gain training-style. A request said in dozens of ways across the
cold-start data and GRPO's rollouts can only be read by the words that carry it.

These are training wordings, written from the training sentences alone: no sentence shares a
run of four words with any held-out sentence (tests/rl/simulator/test_wide_customer.py), a
stricter apartness than the varied customer's (no held-out sentence contains a training one).
"""

from __future__ import annotations

import re

from rl.simulator.scripted import ScriptedCustomer
from rl.simulator.varied import LEADS, VariedBank, _lower_first, wordings
from rl.tasks.schema import Customer, Goal

WIDE_VERSION = "wide-2"  # 2: reports what its yes covers (scripted-6)

# (a training sentence, matched whole, as in varied.RULES) -> more wordings; {name}: the match's
# group; {o}: the order, named in one of the ways of `order_names`.
WIDE: list[tuple[str, list[str]]] = [
    (r"Hi!", ["Hey!", "Hello, good afternoon.", "Hi, I have a question.", "Good evening!", "Hi, can you help?"]),
    (r"Thanks, that's all I needed\.", ["That's all, thanks a lot.", "That settles it, thanks.",
                                       "Nothing else, thank you.", "All done, thanks for the help."]),
    (r"I'd like to cancel (?P<o>my order \S+|one of my orders)\.",
     ["Would you please cancel {o}?", "I need to cancel {o}.", "I wish to cancel {o}.", "Cancel {o}, please.",
      "Could {o} be cancelled?", "I'd like {o} called off.", "Please call off {o}.",
      "I want to call off {o}.", "Is it possible to cancel {o}?", "Help me cancel {o}.",
      "I'm writing to cancel {o}.", "I'd rather not go ahead with {o}; please cancel it."]),
    (r"I want to cancel my order (?P<ref>\S+)\.", ["Cancel my order {ref}, please.", "I need order {ref} cancelled.",
                                                  "Could order {ref} be cancelled?"]),
    (r"I need to change the shipping address of (?P<o>my order \S+|one of my orders)\.",
     ["Would you change the shipping address of {o}?", "I'd like to change where {o} ships.",
      "The address on {o} is wrong; I need to change it.", "Please ship {o} to another address.",
      "Could {o} go to a different address?", "I want to update the shipping address for {o}.",
      "Help me change the delivery address of {o}.", "{O} needs a new shipping address.",
      "Is it possible to redirect {o} to another address?", "I'd like to move the shipping of {o} to a new place."]),
    (r"I want to return something from (?P<o>my order \S+|one of my orders)\.",
     ["I'd like to send an item from {o} back.", "An item from {o} has to go back.",
      "Could I return an item of {o}?", "I wish to return an item I got in {o}.",
      "Help me return an item from {o}.", "I need to send back an item from {o}."]),
    (r"I want to pay for (?P<o>my order \S+|one of my orders) with a different payment method\.",
     ["I'd like to pay for {o} another way.", "Please switch the payment method of {o}."]),
    (r"I want to (?P<verb>change|exchange) an item in (?P<o>my order \S+|one of my orders)\.",
     ["I need to {verb} an item of {o}.", "Could I {verb} an item from {o}?"]),
    (r"I moved and need to update my default address\.",
     ["My default address is out of date since I moved.", "Please update my default address; I moved."]),
    (r"What is the current status of my order (?P<ref>\S+), and what is its tracking number\?",
     ["What's happening with my order {ref}? Please give me the tracking number too.",
      "Could you check the status of order {ref} and give me its tracking number?",
      "I want to know where order {ref} stands, and its tracking number.",
      "Can you look up my order {ref}? I need its status and tracking number.",
      "Status and tracking number of my order {ref}, please.",
      "Is my order {ref} on its way? What are its status and tracking number?",
      "Please check on my order {ref}: its status, and the tracking number."]),
    (r"How many (?P<p>.+) options do you have available right now\?",
     ["How many {p} options can I choose from right now?", "Please tell me how many {p} options are available."]),
    (r"Actually, wait - I've changed my mind, please don't do that\.",
     ["Wait, no - please don't do that.", "Hold off, I've changed my mind.", "Stop, I'd rather not do that after all.",
      "Please don't go ahead with that; I changed my mind.", "Cancel that plan, I've changed my mind."]),
    (r"Hmm, on second thought, let's not do that\.",
     ["Hmm, let's skip that.", "Thinking again, please don't do that.", "Actually, no, let's not."]),
    (r"It's order (?P<ref>\S+)\.", ["Order {ref}.", "I believe the order is {ref}.", "That's order {ref}.",
                                    "It's {ref}.", "The order id is {ref}."]),
    (r"Please ship it to (?P<v>.+)\.", ["Have it sent to {v}, please.", "The address should be {v}.",
                                        "I want it shipped to {v}.", "Use {v} as the address.",
                                        "It needs to go to {v}."]),
    (r"My new address is (?P<v>.+)\.", ["I'm now at {v}.", "My address is now {v}."]),
    (r"Please use (?P<v>.+)\.", ["Use {v}, please.", "I'll pay with {v}."]),
    (r"Please refund (?P<v>.+)\.", ["Refund {v}, please.", "Put the refund on {v}.", "The refund goes to {v}."]),
    (r"I want to return (?P<v>.+)\.", ["I'm returning {v}.", "I'd like to send back {v}."]),
    (r"I no longer need it\.", ["It's not needed anymore.", "I have no use for it now.",
                                "I no longer have a need for it.", "Turns out it's not needed.",
                                "I've no need for it these days."]),
    (r"I ordered it by mistake\.", ["I made that order in error.", "That order was placed in error.",
                                    "It was a mistaken order.", "I clicked order by mistake.",
                                    "I ordered it in error."]),
    (r"My email is (?P<e>\S+)\.", ["Email: {e}.", "I'm registered as {e}.", "It's {e}.", "My e-mail is {e}.",
                                   "Try my email, {e}."]),
    # A name as people introduce themselves ("I'm", "the name is"): the teacher's oracle reads it so.
    (r"My name is (?P<f>\S+) (?P<l>\S+) and my zip code is (?P<z>\d{5})\.",
     ["The name is {f} {l}, zip code {z}.", "Name's {f} {l}, and the zip is {z}.", "I'm {f} {l}; zip {z}.",
      "I am {f} {l}, with zip {z}."]),
    (r"I don't remember my email, but my name is (?P<f>\S+) (?P<l>\S+) and my zip code is (?P<z>\d{5})\.",
     ["I can't recall my email. I'm {f} {l}, zip {z}.", "The email slipped my mind, but I'm {f} {l}, zip code {z}."]),
    # A yes opens with "yes", as every training yes does: the teacher's oracle reads it so.
    (r"Yes, please go ahead\.", ["Yes.", "Yes, go on.", "Yes, that works.", "Yes, okay.", "Yes, please do it."]),
    (r"Yes, that's right\.", ["Yes, exactly.", "Yes, right."]),
    (r"Yes, I confirm\.", ["Yes, I agree to that.", "Yes, I agree."]),
    (r"Yes, please go ahead with it\.", ["Yes, I already said yes.", "Yes, you can proceed."]),
    (r"I see, that can't be done then\.", ["So it's not possible, okay."]),
    (r"Never mind, let's leave it\.", ["Let's just drop it."]),
    (r"No, that's not the reason\.", ["No, my reason is different."]),
    (r"No, that's not what I want\.", ["No, I didn't ask for that.", "No, that's not my request."]),
    (r"I'm not sure I know that\.", ["I can't tell you that."]),
]
_WIDE = [(re.compile(p), words) for p, words in WIDE]
# Opening words a request or a fact may start with: they carry nothing the agent needs. Each is a
# sentence of its own, so what follows keeps its capital (a name may come first).
FILLERS = ["Okay. ", "Right. ", "Alright. ", "One moment. ", "Let me see. "]
FILLER_P = 0.3
_MY_ORDER = re.compile(r"^my order (?P<ref>\S+)$")


def order_names(o: str) -> list[str]:
    """Ways to name the order the training sentence names as `o` ("my order #W1" or "one of my orders")."""
    m = _MY_ORDER.match(o)
    if m:
        ref = m["ref"]
        return [o, f"order {ref}", f"the order {ref}", f"my order number {ref}", f"order number {ref}"]
    return [o, "an order", "an order I placed", "a recent order", "one order"]


def wide_wordings(sentence: str) -> list[str]:
    """Every wording of one training sentence: its varied wordings and, when a rule of `WIDE` knows
    it, the wider ones, with every name of its order."""
    lead = next((k for k in LEADS if sentence.startswith(k)), "")
    body = sentence[len(lead):]
    if lead:
        body = body[:1].upper() + body[1:]
    out = wordings(body)
    for pattern, words in _WIDE:
        m = pattern.fullmatch(body)
        if m:
            groups = m.groupdict()
            names = order_names(groups["o"]) if "o" in groups else [None]
            for w in words:
                for name in names:
                    g = dict(groups) if name is None else {**groups, "o": name, "O": name[:1].upper() + name[1:]}
                    out.append(w.format(**g))
            break
    if not lead:
        return out
    return [f"{ld}{_lower_first(w)}" for ld in LEADS[lead] for w in out]


class WideBank(VariedBank):
    """The training bank's lines, each sentence in a wording drawn from `wide_wordings`; requests and
    facts sometimes open with a filler."""

    tag = "wide"
    choices = staticmethod(wide_wordings)

    def _filled(self, text: str) -> str:
        if self.rng.random() >= FILLER_P:
            return text
        return self.rng.choice(FILLERS) + text

    def statement(self, goal: Goal, next_request: bool) -> str:
        return self._filled(super().statement(goal, next_request))

    def detail(self, goal: Goal, slot: str) -> str:
        return self._filled(super().detail(goal, slot))

    def email(self, email: str) -> str:
        return self._filled(super().email(email))

    def name_zip(self, c: Customer) -> str:
        return self._filled(super().name_zip(c))


class WideCustomer(ScriptedCustomer):
    """Factory of wide training sessions (the `UserSimulator` for `--user wide`); `wordings` tells the
    cold-start teacher every way a fact may have been said."""

    name = "wide"
    prompt_version = WIDE_VERSION
    bank = WideBank
    wordings = staticmethod(wide_wordings)
