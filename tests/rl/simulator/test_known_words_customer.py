"""The held-out customer in known words: sentences apart from every training sentence, as the
held-out customer's, and every word one the training customers say or a value of the task. What it
shares with the held-out customer's logic is tested with it (tests/rl/simulator/test_heldout_customer.py)."""

from __future__ import annotations

import re

from rl.experiment.recipe import EVAL_MIX, RL_MIX, TINY_COLD_START
from rl.simulator import known_words as K
from rl.simulator.bank import THANKS, YES
from rl.simulator.base import make_user
from rl.simulator.heldout import HeldOutCustomer
from rl.simulator.known_words import KnownWordsCustomer
from rl.simulator.scripted import ScriptedCustomer
from rl.simulator.varied import VariedCustomer
from rl.simulator.wide import WideCustomer
from tests.rl.simulator.probe import probe
from tests.rl.simulator.test_heldout_customer import TRAINING_PHRASES, TRAINING_SENTENCES, VALUE, sentences

WORD = re.compile(r"[a-z]+")


def _said(customer, tasks, seeds=range(3)) -> dict[str, set[str]]:
    """task id -> the sentences `customer` says to the probe over `seeds`."""
    return {t.id: {s for seed in seeds for r in probe(customer.session(t, seed), t) for s in sentences(r)}
            for t in tasks}


def _words(texts) -> set[str]:
    return {w for text in texts for w in WORD.findall(text.lower())}


def _category(task) -> str:
    return next(t for t in task.tags if t.startswith("category:")).removeprefix("category:")


def _values(task) -> set[str]:
    """The words of the task's values: ids, emails, numbers, option lists and capitalised names in its
    script's sentences (what rl/simulator/heldout.py keeps verbatim), and the customer's name."""
    texts = [f"{task.customer.first_name} {task.customer.last_name} {task.customer.email}"]
    for g in task.script.goals:
        texts += [v for x in (g.say, *g.details.values(), g.late or "") for v in VALUE.findall(x)]
    return _words(texts)


def test_every_word_is_a_training_word_or_a_value_of_the_task(tasks):
    """Training words: what the training customers say on the kinds cpu-tiny trains on (cold start and
    RL), so a word only an untrained kind uses does not count; checked on the evaluation's kinds."""
    trained = [t for t in tasks if _category(t) in {*TINY_COLD_START, *RL_MIX}]
    evaluated = [t for t in tasks if _category(t) in EVAL_MIX]
    assert len(trained) > 60 and len(evaluated) > 40
    training = _words(s for said in (_said(ScriptedCustomer(), trained), _said(VariedCustomer(), trained))
                      for ss in said.values() for s in ss)
    known = _said(KnownWordsCustomer(), evaluated)
    unseen = {t.id: sorted(new) for t in evaluated if (new := _words(known[t.id]) - training - _values(t))}
    assert unseen == {}
    # the held-out customer it rewords does say words training never does (what this customer is for)
    held = _said(HeldOutCustomer(), evaluated)
    assert {"accident", "somewhere", "yep"} <= _words(s for ss in held.values() for s in ss) - training


def test_no_sentence_is_or_contains_a_training_sentence(tasks):
    said = {s for ss in _said(KnownWordsCustomer(), tasks).values() for s in ss}
    assert len(said) > 1000
    patterns = [re.compile(p) for p in TRAINING_SENTENCES]
    assert [(s, p.pattern) for s in said for p in patterns if p.search(s)] == []
    assert [(s, w) for s in said for w in TRAINING_PHRASES if w in s] == []
    for training in (ScriptedCustomer(), VariedCustomer(), WideCustomer()):
        theirs = {s for ss in _said(training, tasks).values() for s in ss}
        assert [(s, t) for s in said for t in theirs if t in s] == [], type(training).__name__


def test_the_fixed_lines_are_new():
    fixed = [*K.GREETINGS, *K.YES, *K.THANKS, *K.SHIFTS, *K.REASON_WORDS.values(), *K.REASON_SENTENCES.values()]
    patterns = [re.compile(p) for p in TRAINING_SENTENCES]
    assert [s for line in fixed for s in sentences(line) if any(p.search(s) for p in patterns)] == []
    assert not set(K.YES) & set(YES) and not set(K.THANKS) & set(THANKS)


def test_deterministic_and_its_own_words():
    u = make_user("heldout-known")
    assert type(u).__name__ == "KnownWordsCustomer" and u.name == "heldout-known"
    assert u.prompt_version == K.KNOWN_WORDS_VERSION


def test_its_sentences_are_not_the_held_out_customers(tasks):
    """(Values verbatim, the training customer's decisions and determinism: parametrized in
    tests/rl/simulator/test_heldout_customer.py.)"""
    t = tasks[0]
    assert probe(KnownWordsCustomer().session(t, 0), t) != probe(HeldOutCustomer().session(t, 0), t)
