"""The varied training customer: the training customer's sentences in several wordings each, values
kept verbatim, the same decisions, and still apart from every held-out sentence."""

from __future__ import annotations

import re
import string

from rl.simulator.base import make_user
from rl.simulator.heldout import HeldOutCustomer
from rl.simulator.scripted import ScriptedCustomer
from rl.simulator.varied import LEADS, RULES, VARIED_VERSION, VariedCustomer, wordings
from tests.rl.simulator.probe import decisions, probe
from tests.rl.simulator.test_heldout_customer import sentences


def _said(customer, tasks, seeds=range(3)) -> set[str]:
    return {s for t in tasks for seed in seeds for r in probe(customer.session(t, seed), t) for s in sentences(r)}


def test_no_held_out_sentence_is_or_contains_a_varied_training_sentence(tasks):
    varied = _said(VariedCustomer(), tasks)
    held = _said(HeldOutCustomer(), tasks)
    training = _said(ScriptedCustomer(), tasks)
    assert len(varied) > 1.3 * len(training)  # more wordings than the one-phrasing customer says
    assert [(h, v) for h in held for v in varied if v in h] == []


def test_every_wording_keeps_every_value_of_its_sentence():
    for pattern, words in RULES:
        groups = set(re.compile(pattern).groupindex)
        assert words[0] == re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern).replace("\\", ""), pattern
        for w in words:
            fields = {f for _, f, _, _ in string.Formatter().parse(w) if f}
            assert fields == groups, (pattern, w)


def test_wordings_of_a_sentence_and_of_a_lead_in():
    assert wordings("I'd like to cancel my order #W1.")[0] == "I'd like to cancel my order #W1."
    assert "Please cancel my order #W1." in wordings("I'd like to cancel my order #W1.")
    led = wordings("Instead, i'd like to cancel one of my orders.")
    assert len(led) == len(LEADS["Instead, "]) * 6 and "Rather, please cancel one of my orders." in led
    assert wordings("Something nobody scripted.") == ["Something nobody scripted."]


def test_it_decides_as_the_training_customer(tasks):
    for t in tasks:
        for seed in range(2):
            varied, scripted = VariedCustomer().session(t, seed), ScriptedCustomer().session(t, seed)
            assert decisions(varied, t) == decisions(scripted, t), t.id


def test_deterministic_per_task_and_seed_and_varied_across_seeds(tasks):
    t = tasks[0]
    runs = {seed: probe(VariedCustomer().session(t, seed), t) for seed in range(8)}
    assert runs[3] == probe(VariedCustomer().session(t, 3), t)
    assert len({tuple(r) for r in runs.values()}) > 1


def test_make_user_varied():
    u = make_user("varied")
    assert isinstance(u, VariedCustomer) and u.name == "varied" and u.prompt_version == VARIED_VERSION
