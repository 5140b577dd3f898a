"""The held-out evaluation customer: the training customer's script and decisions in words training
never used. Its sentences are apart from every training sentence (the training bank, the generator's
and importer's script sentences, the training phrasings of rl/tasks/phrasing.py), every value still
appears verbatim, and it decides as the training customer does."""

from __future__ import annotations

import re

import pytest

from rl.simulator import heldout as H
from rl.simulator.bank import THANKS, YES
from rl.simulator.base import STOP_TOKENS, make_user
from rl.simulator.heldout import HeldOutCustomer
from rl.simulator.known_words import KnownWordsCustomer
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import SHIFT_LINES
from rl.tasks.goals import REASONS
from rl.tasks.phrasing import KIND_VERB, address_text
from tests.rl.simulator.probe import probe

REF = r"#?W\d+"
EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
NAME = r"[A-Z][\w'-]*"
ANY = r".+?"
ORDER = rf"(?:my order {REF}|one of my orders)"
VERB = r"(?:change|exchange)"
# Every sentence the training customer can say, with its values as patterns (case-sensitive).
TRAINING_LINES = [*YES, *THANKS, *SHIFT_LINES, *REASONS.values(), "They no longer need it.",
                     "Yes, please go ahead with it.", "I see, that can't be done then.", "Never mind, let's leave it.",
                     "I see, okay.", "Are you sure?", "No, that's not the reason.", "No, that's not what I want.",
                     "I'm not sure I know that.", "Sorry, my mistake.", "Hi!", "Thanks, that's all I needed.",
                     "I moved and need to update my default address.", "Please, can't you make an exception?",
                     "This is ridiculous.", "Fine.", "Then I'll just return it.", "Nothing.",
                     "Alright, then refund it to the original payment method.",
                     "Refund it to the original payment method."]
_SPLIT = re.compile(r"(?<=[.?!])\s+")
TRAINING_SENTENCES = [
    *(re.escape(s) for line in TRAINING_LINES for s in _SPLIT.split(line)),
    rf"My email is {EMAIL}\.", rf"It's {EMAIL}\.", rf"My name is {NAME} {NAME} and my zip code is \d{{5}}\.",
    rf"I don't remember my email, but my name is {NAME} {NAME} and my zip code is \d{{5}}\.",
    rf"I'd like to cancel {ORDER}\.", rf"I need to change the shipping address of {ORDER}\.",
    rf"I want to pay for {ORDER} with a different payment method\.", rf"I want to {VERB} an item in {ORDER}\.",
    rf"I want to return something from {ORDER}\.", rf"I want to cancel my order {REF}\.",
    rf"What is the current status of my order {REF}, and what is its tracking number\?",
    rf"How many {ANY} options do you have available right now\?", rf"I want to return items from my order {REF}",
    rf"Also, please cancel my friend's order {REF}\.", "One more thing:", "Instead, ",
    rf"I really need to {ANY}\.", rf"I really want to {ANY}\.", rf"I insist, I want to {ANY}\.",
    rf"It's order {REF}\.", rf"Please ship it to {ANY}\.", rf"Please use {ANY}\.", rf"I'd like to {VERB} {ANY}\.",
    rf"Use {ANY} for any price difference\.", rf"I want to return {ANY}\.", rf"Please refund {ANY}\.",
    rf"My new address is {ANY}\.", rf"The {NAME}(?: {NAME})*\.", rf"Oh, one more: I'd also like to {VERB}",
    "Oh, and I also want to return", rf"The reason is: {ANY}\.", rf"The new address is {ANY}\.",
]
# rl/tasks/phrasing.py's training phrasings: how the training customer names payment methods, and
# the kinds of change as the customer states them (the phrases, not the single verbs such as "cancel").
TRAINING_PHRASES = ["card ending in", "my PayPal account", "my gift card", *(v for v in KIND_VERB.values() if " " in v)]


def sentences(reply: str) -> list[str]:
    for token in STOP_TOKENS:
        reply = reply.replace(token, "")
    return [s for s in _SPLIT.split(reply.strip()) if s]


def test_no_held_out_sentence_is_or_contains_a_training_sentence(tasks):
    patterns = [re.compile(p) for p in TRAINING_SENTENCES]
    said: set[str] = set()
    training: set[str] = set()
    for t in tasks:
        for seed in range(3):
            said.update(s for r in probe(HeldOutCustomer().session(t, seed), t) for s in sentences(r))
            training.update(s for r in probe(ScriptedCustomer().session(t, seed), t) for s in sentences(r))
    assert len(said) > 1000
    # the patterns cover what the training customer says (so they are not out of date) ...
    assert [s for s in training if not any(p.search(s) for p in patterns)] == []
    # ... and nothing the held-out customer says
    assert [(s, p.pattern) for s in said for p in patterns if p.search(s)] == []
    assert [(s, w) for s in said for w in TRAINING_PHRASES if w in s] == []
    # the same conversations with the training customer: no held-out sentence contains one of its sentences
    assert [(s, t) for s in said for t in training if t in s] == []


def test_the_bank_lines_are_apart_from_the_training_lines():
    fixed = [*H.GREETINGS, *H.YES, *H.THANKS, *H.SHIFTS, *H.REASON_WORDS.values(), *H.REASON_SENTENCES.values()]
    patterns = [re.compile(p) for p in TRAINING_SENTENCES]
    assert [s for line in fixed for s in sentences(line) if any(p.search(s) for p in patterns)] == []
    assert not set(H.YES) & set(YES) and not set(H.THANKS) & set(THANKS)


# order ids, emails, numbers, option lists and capitalised names inside a sentence
VALUE = re.compile(r"#W\d+|\S+@\S+|\d[\d.,]*\w*|\([^()]*\)|(?<=[a-z] )(?!I')[A-Z][\w-]+")


# the held-out customer and its rewording in known words (rl/simulator/known_words.py) share the logic
HELD_OUT = [HeldOutCustomer, KnownWordsCustomer]


@pytest.mark.parametrize("customer", HELD_OUT)
def test_values_appear_verbatim(tasks, customer):
    checked = 0
    for t in tasks:
        bank = customer.bank(t, 0)
        c = t.customer
        assert c.email in bank.email(c.email)
        assert all(c.email in bank.corrected_email(c.email, asked=a) for a in (True, False))
        assert all(v in bank.name_zip(c) for v in (c.first_name, c.last_name, c.zip))
        for g in t.script.goals:
            for slot, text in g.details.items():
                mine = bank.detail(g, slot)
                values = [v.strip(".,") for v in VALUE.findall(text)]
                missing = [v for v in values if v not in mine and v not in ("PayPal",)]
                assert missing == [], (text, mine)
                checked += len(values)
            if g.late:
                assert [v for v in VALUE.findall(g.late) if v.strip(".,") not in bank.late(g)] == []
            if g.order_id and "order_id" in g.upfront:
                assert g.order_id in bank.statement(g, next_request=False)
            if g.action and "address1" in g.action.arguments:
                assert address_text(g.action.arguments) in bank.detail(g, "address")
    assert checked > 1000


@pytest.mark.parametrize("customer", HELD_OUT)
def test_it_decides_as_the_training_customer(tasks, customer):
    """Same probe, same decisions: after every reply the two sessions are in the same state (for the
    customers that do not volunteer their identity, which changes what an identity question gets)."""
    def state(s):
        return (s.k, dict(s.status), set(s.revealed), s.finished, s.confirmed, s.haggled, s.late_given, s.stuck)

    compared = 0
    for t in tasks:
        for seed in range(3):
            held = customer().session(t, seed)
            if held.bank.volunteers_identity():
                continue
            states: tuple[list, list] = ([], [])
            probe(held, t, observe=lambda s, out=states[0]: out.append(state(s)))
            probe(ScriptedCustomer().session(t, seed), t, observe=lambda s, out=states[1]: out.append(state(s)))
            assert states[0] == states[1], t.id
            compared += 1
    assert compared > 200


@pytest.mark.parametrize("customer", HELD_OUT)
def test_deterministic_per_task_and_seed_and_varied_across_seeds(tasks, customer):
    t = tasks[0]
    runs = {seed: probe(customer().session(t, seed), t) for seed in range(8)}
    assert runs[3] == probe(customer().session(t, 3), t)
    assert len({tuple(r) for r in runs.values()}) > 1


def test_some_customers_volunteer_their_identity_in_the_opening(tasks):
    openings = [probe(HeldOutCustomer().session(t, 0), t, turns=0)[0] for t in tasks]
    with_identity = [o for t, o in zip(tasks, openings, strict=True)
                     if t.customer.email in o or (t.customer.wrong_email or "@@") in o or t.customer.zip in o]
    assert 0.15 * len(tasks) < len(with_identity) < 0.6 * len(tasks)


def test_make_user_names_every_customer():
    for spec, cls_name, version in (("scripted", "ScriptedCustomer", "scripted-6"),
                                    ("heldout", "HeldOutCustomer", H.HELDOUT_VERSION),
                                    ("scripted-static", "StaticCustomer", "static-2")):
        u = make_user(spec)
        assert type(u).__name__ == cls_name and u.name == spec and u.prompt_version == version and u.model
    with pytest.raises(ValueError, match="heldout"):
        make_user("nobody")
