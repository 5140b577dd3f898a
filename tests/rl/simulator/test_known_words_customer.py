"""The held-out customer in known words: sentences apart from every training sentence, as the
held-out customer's, and every word one the training customers say or a value of the task."""

from __future__ import annotations

import re

from rl.experiment.recipe import EVAL_MIX, RL_MIX, TINY_COLD_START
from rl.simulator import known_words as K
from rl.simulator.bank import THANKS, YES
from rl.simulator.base import make_user
from rl.simulator.heldout import HeldOutCustomer
from rl.simulator.known_words import KnownWordsBank, KnownWordsCustomer
from rl.simulator.scripted import ScriptedCustomer
from rl.simulator.varied import VariedCustomer
from rl.simulator.wide import WideCustomer
from rl.tasks.phrasing import address_text
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


def test_values_appear_verbatim(tasks):
    checked = 0
    for t in tasks:
        bank = KnownWordsBank(t, 0)
        c = t.customer
        assert c.email in bank.email(c.email) and c.email in bank.corrected_email(c.email, asked=False)
        assert all(v in bank.name_zip(c) for v in (c.first_name, c.last_name, c.zip))
        for g in t.script.goals:
            for slot, text in g.details.items():
                mine = bank.detail(g, slot)
                values = [v.strip(".,") for v in VALUE.findall(text)]
                assert [v for v in values if v not in mine and v != "PayPal"] == [], (text, mine)
                checked += len(values)
            if g.order_id and "order_id" in g.upfront:
                assert g.order_id in bank.statement(g, next_request=False)
            if g.action and "address1" in g.action.arguments:
                assert address_text(g.action.arguments) in bank.detail(g, "address")
    assert checked > 1000


def test_it_decides_as_the_training_customer(tasks):
    def state(s):
        return (s.k, dict(s.status), set(s.revealed), s.finished, s.confirmed, s.haggled, s.late_given, s.stuck)

    compared = 0
    for t in tasks:
        for seed in range(3):
            known = KnownWordsCustomer().session(t, seed)
            if known.bank.volunteers_identity():
                continue
            states: tuple[list, list] = ([], [])
            probe(known, t, observe=lambda s, out=states[0]: out.append(state(s)))
            probe(ScriptedCustomer().session(t, seed), t, observe=lambda s, out=states[1]: out.append(state(s)))
            assert states[0] == states[1], t.id
            compared += 1
    assert compared > 200


def test_deterministic_and_its_own_words():
    u = make_user("heldout-known")
    assert type(u).__name__ == "KnownWordsCustomer" and u.name == "heldout-known"
    assert u.prompt_version == K.KNOWN_WORDS_VERSION


def test_same_task_and_seed_same_conversation(tasks):
    t = tasks[0]
    runs = {seed: probe(KnownWordsCustomer().session(t, seed), t) for seed in range(8)}
    assert runs[3] == probe(KnownWordsCustomer().session(t, 3), t)
    assert len({tuple(r) for r in runs.values()}) > 1
    # its sentences are not the held-out customer's
    assert probe(KnownWordsCustomer().session(t, 0), t) != probe(HeldOutCustomer().session(t, 0), t)
