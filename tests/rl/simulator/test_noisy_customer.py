"""The noisy training customer: random words in what the agent reads, never inside a value, while
the customer underneath decides exactly as without them."""

from __future__ import annotations

import asyncio
import random

import pytest

from rl.models.tokenizer import train_bpe
from rl.simulator.noisy import NoisyCustomer, noise_words, with_noise
from rl.simulator.varied import VariedCustomer
from rl.tasks.generator import SCHEDULE, generate_tasks
from rl.tasks.stores import resolve_store, synthetic_ref
from tests.rl.simulator.probe import probe

WORDS = ["zorb", "quill", "mantle"]


def _without(noisy: str, clean: str, words: list[str]) -> bool:
    """Whether `noisy` is `clean` with only words of `words` inserted (case aside) between its words."""
    want = clean.split(" ")
    i = 0
    for part in noisy.split(" "):
        if i < len(want) and part == want[i]:
            i += 1
        elif part.lower() not in words:
            return False
    return i == len(want)


@pytest.fixture(scope="module")
def tasks():
    ref = synthetic_ref(0, 200)
    return generate_tasks(resolve_store(ref), 2 * len(SCHEDULE), 41, snapshot=ref)


def test_noise_goes_only_at_the_start_and_between_lowercase_words():
    text = "Hi! I need my order #W123 shipped to 12 Main Street, Springfield, CA 94016 as soon as possible."
    noisy = with_noise(text, random.Random(0), 1.0, WORDS)
    assert _without(noisy, text, WORDS) and noisy != text
    parts = noisy.split(" ")
    assert parts[0].lower() in WORDS and parts[0][0].isupper()  # the message's start, capitalized
    inserted = [i for i, w in enumerate(parts) if w in WORDS]
    # not after "I" (a capital) nor next to "#W123", "12", "Main", ... nor before "possible." (a dot)
    assert [(parts[i - 1], parts[i + 1]) for i in inserted] == [
        ("need", "my"), ("my", "order"), ("shipped", "to"), ("as", "soon"), ("soon", "as")]
    assert " #W123 " in noisy and " 12 Main Street, Springfield, CA 94016 " in noisy  # values never split
    assert with_noise(text, random.Random(0), 0.0, WORDS) == text


def test_noise_words_are_the_tokenizers_plain_words():
    tok = train_bpe(["please cancel my order now, thanks", "the order was not delivered yesterday"] * 50,
                    vocab_size=1000, min_frequency=1)
    words = noise_words(tok)
    assert {"now", "order", "delivered"} <= set(words)
    assert not {"cancel", "not"} & set(words)  # words that would change what a message asks
    assert all(w.isascii() and w.isalpha() for w in words)


def test_the_customer_underneath_decides_as_without_noise(tasks):
    def state(s):
        return (s.k, dict(s.status), set(s.revealed), s.finished, s.confirmed, s.haggled, s.late_given, s.stuck)

    noisy_customer = NoisyCustomer(VariedCustomer(), WORDS, 0.5)
    inserted = 0
    for t in tasks:
        states: tuple[list, list] = ([], [])
        agreed: tuple[list, list] = ([], [])
        noisy = probe(noisy_customer.session(t, 1), t,
                      observe=lambda s, o=states[0], a=agreed[0]: (o.append(state(s.inner)), a.append(s.agreed)))
        clean = probe(VariedCustomer().session(t, 1), t,
                      observe=lambda s, o=states[1], a=agreed[1]: (o.append(state(s)), a.append(s.agreed)))
        assert states[0] == states[1] and agreed[0] == agreed[1], t.id
        assert len(noisy) == len(clean) and all(_without(n, c, WORDS) for n, c in zip(noisy, clean, strict=True))
        inserted += sum(n != c for n, c in zip(noisy, clean, strict=True))
    assert inserted > len(tasks)  # the noise is there


def test_respond_is_the_noisy_reply_and_names_say_so(tasks):
    t = tasks[0]
    customer = NoisyCustomer(VariedCustomer(), WORDS, 1.0)
    msgs = [{"role": "system", "content": "policy"}]
    reply, done = asyncio.run(customer.session(t, 3).respond(msgs))
    first, _ = VariedCustomer().session(t, 3).reply(msgs)
    assert not done and reply != first and _without(reply, first, WORDS)
    assert customer.name == "varied+noise1" and customer.prompt_version.endswith("+noisy-1")
    with pytest.raises(ValueError):
        NoisyCustomer(VariedCustomer(), [], 0.1)
