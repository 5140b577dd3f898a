"""A training customer whose messages reach the agent with random words inserted.

`NoisyCustomer(inner, words, p)` plays `inner`'s sessions unchanged (same goals, decisions, stops
and consents) and only changes what the agent reads: at the start of each message and in each gap
between two lowercase words, a word drawn from `words` is inserted with probability `p`. Values
(order ids, emails, addresses, names, items) are never split: they hold digits, symbols or capitals,
and the gaps next to such a word are left alone. The inner session is always shown its own words,
never the noisy ones, so its script and its reading of the agent are those of the clean customer.

Why: the held-out evaluation customer's messages are full of tokens a model trained from scratch
on our text never read, and they derail it (issue 23, `dev-noise` in bench/results/README.md).
Noise in the cold-start data raised the cold start's held-out reading but left GRPO little to add;
noise in GRPO's rollouts lets the reward teach the policy to act on the request whatever else the
message holds. `noise_words` takes the words from the model's own tokenizer (every ordinary
word-initial token), so no evaluation wording is ever used in training.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from rl.models.tokenizer import ordinary_ids
from rl.simulator.base import Message, UserSession, UserSimulator
from rl.tasks.schema import Task

NOISY_VERSION = "noisy-1"
_LOWER = re.compile(r"[a-z]+")


# Words that would change what a message asks or answers (a yes, a no, the kind of change): noise
# must not turn "please go ahead" into "please not go ahead", nor an address change into a return.
DECISION_WORDS = frozenset({
    "no", "not", "nor", "never", "none", "nothing", "don", "dont", "yes", "yeah", "yep", "ok", "okay", "sure",
    "stop", "wait", "cancel", "cancelled", "return", "exchange", "change", "modify", "update", "address",
    "payment", "refund", "status", "tracking"})


def noise_words(tokenizer: Any) -> list[str]:
    """The tokenizer's ordinary word-initial tokens that are plain ASCII words (" word" -> "word"),
    but for `DECISION_WORDS`."""
    words = set()
    for i in ordinary_ids(tokenizer):
        text = tokenizer.decode([i])
        if (len(text) > 2 and text[0] == " " and text[1:].isascii() and text[1:].isalpha()
                and text[1:].lower() not in DECISION_WORDS):
            words.add(text[1:])
    return sorted(words)


def with_noise(text: str, rng: random.Random, p: float, words: Sequence[str]) -> str:
    """`text` with a word from `words` inserted at its start (capitalized) and in each gap between two
    lowercase words, each with probability `p`. Every original character stays, in order."""
    parts = text.split(" ")
    out: list[str] = []
    if parts and parts[0] and rng.random() < p:
        out.append(rng.choice(words).capitalize())
    for i, part in enumerate(parts):
        if i and _LOWER.fullmatch(parts[i - 1]) and _LOWER.fullmatch(part) and rng.random() < p:
            out.append(rng.choice(words).lower())
        out.append(part)
    return " ".join(out)


class NoisySession:
    def __init__(self, inner: UserSession, rng: random.Random, p: float, words: Sequence[str]) -> None:
        self.inner, self.rng, self.p, self.words = inner, rng, p, words
        self.said: dict[str, str] = {}  # noisy message -> what the inner customer said

    @property
    def agreed(self) -> Any:  # the inner customer's consent report (rl/env/consent.py), if it gives one
        return getattr(self.inner, "agreed", None)

    @property
    def agreed_to(self) -> Any:  # and which change it covers
        return getattr(self.inner, "agreed_to", None)

    def _clean(self, conversation: list[Message]) -> list[Message]:
        return [{**m, "content": self.said.get(str(m.get("content")), m.get("content"))}
                if m.get("role") == "user" else m for m in conversation]

    def _noisy(self, reply: str) -> str:
        noisy = with_noise(reply, self.rng, self.p, self.words)
        self.said[noisy] = reply
        return noisy

    async def respond(self, conversation: list[Message]) -> tuple[str, bool]:
        reply, done = await self.inner.respond(self._clean(conversation))
        return self._noisy(reply), done

    def reply(self, conversation: list[Message]) -> tuple[str, bool]:
        """The synchronous form, for inner sessions that have one (the scripted customers)."""
        reply, done = self.inner.reply(self._clean(conversation))
        return self._noisy(reply), done


class NoisyCustomer:
    """`inner` with random words in its messages as the agent reads them (module doc)."""

    def __init__(self, inner: UserSimulator, words: Sequence[str], p: float) -> None:
        if not words:
            raise ValueError("noise needs at least one word")
        if not 0 <= p <= 1:
            raise ValueError(f"noise probability must be in [0, 1], got {p}")
        self.inner, self.words, self.p = inner, list(words), p
        self.name = f"{inner.name}+noise{p:g}"
        self.model = inner.model
        self.prompt_version = f"{inner.prompt_version}+{NOISY_VERSION}"

    def session(self, task: Task, seed: int) -> NoisySession:
        rng = random.Random(f"{task.id}:{seed}:noise")
        return NoisySession(self.inner.session(task, seed), rng, self.p, self.words)
