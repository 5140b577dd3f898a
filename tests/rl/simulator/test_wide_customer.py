"""The wide training customer: many more wordings of each training sentence, values kept verbatim,
the same decisions, and apart from the held-out customer by every run of four words."""

from __future__ import annotations

import re
import string

from rl.simulator.base import make_user
from rl.simulator.heldout import HeldOutCustomer
from rl.simulator.scripted import ScriptedCustomer
from rl.simulator.varied import VariedCustomer, wordings
from rl.simulator.wide import FILLERS, WIDE, WIDE_VERSION, WideCustomer, order_names, wide_wordings
from tests.rl.simulator.probe import decisions, probe
from tests.rl.simulator.test_varied_customer import _said


def _grams(text: str, n: int = 4) -> set[tuple[str, ...]]:
    words = re.findall(r"[\w#@'-]+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def test_no_wide_wording_shares_four_words_with_a_held_out_sentence(tasks):
    training = _said(ScriptedCustomer(), tasks)
    varied = {w for s in training for w in wordings(s)}
    wide = {w for s in training for w in wide_wordings(s)} | {f.strip() for f in FILLERS}
    assert len(wide) > 3 * len(varied)
    # Runs of four words the held-out customer says and no earlier training customer does: a value
    # said by both (an address, an item) is no held-out phrasing, so it is not forbidden.
    held = set().union(*(_grams(h) for h in _said(HeldOutCustomer(), tasks)))
    forbidden = held - set().union(*(_grams(s) for s in training | varied))
    shared = sorted((w, g) for w in wide for g in _grams(w) & forbidden)
    assert shared == []


def test_no_held_out_sentence_contains_a_wide_sentence(tasks):
    wide = _said(WideCustomer(), tasks, seeds=range(6))
    held = _said(HeldOutCustomer(), tasks)
    assert [(h, w) for h in held for w in wide if w in h] == []


def test_every_wording_keeps_every_value_of_its_sentence():
    for pattern, words in WIDE:
        groups = set(re.compile(pattern).groupindex)
        for w in words:
            fields = {f.lower() if f == "O" else f for _, f, _, _ in string.Formatter().parse(w) if f}
            assert fields == groups, (pattern, w)


def test_wide_wordings_hold_the_varied_ones_and_name_the_order_several_ways():
    s = "I'd like to cancel my order #W1."
    got = wide_wordings(s)
    assert set(wordings(s)) < set(got)
    assert "Would you please cancel order #W1?" in got and "Order number #W1 needs" not in got
    assert all("#W1" in w for w in got)
    assert order_names("one of my orders")[0] == "one of my orders"
    led = wide_wordings("Instead, i'd like to cancel one of my orders.")
    assert "Rather, would you please cancel a recent order?" in led
    assert wide_wordings("Something nobody scripted.") == ["Something nobody scripted."]


def test_it_decides_as_the_training_customer(tasks):
    for t in tasks:
        for seed in range(2):
            wide, scripted = WideCustomer().session(t, seed), ScriptedCustomer().session(t, seed)
            assert decisions(wide, t) == decisions(scripted, t), t.id


def test_it_says_more_than_the_varied_customer_and_repeats_per_seed(tasks):
    assert len(_said(WideCustomer(), tasks)) > 1.5 * len(_said(VariedCustomer(), tasks))
    t = tasks[0]
    runs = {seed: probe(WideCustomer().session(t, seed), t) for seed in range(8)}
    assert runs[3] == probe(WideCustomer().session(t, 3), t)
    assert len({tuple(r) for r in runs.values()}) > 1


def test_make_user_wide():
    u = make_user("wide")
    assert isinstance(u, WideCustomer) and u.name == "wide" and u.prompt_version == WIDE_VERSION
