"""Where a copied call value may come from: the word-aligned pieces of what the customer said. A
parameter the view copies (a new address's lines, city, state and country, a customer's names)
takes a span of the customer's messages as the model was shown them, starting at the start of a
word, closing only at the end of one and crossing no comma or sentence mark (or empty, for an
address line the customer has none of). A 2M-parameter model can learn where to copy from; it
cannot reliably spell a string it has read once. The same pieces hold free text that has begun a
number the customer said to the rest of its name-like words (`held_copy`): a confirmation that
names the customer's house number names their street."""

from __future__ import annotations

import bisect
import functools
import re

from rl.chat.views import REF_PATTERN

_PHRASE_END = re.compile(r"[,.;:!?\n]")  # a copied value never crosses one: "Austin", not "Austin, TX"
# words that begin with a digit, a capital or a reference token, one space apart: "4149 Sunset Boulevard"
_NAME_RUN = re.compile(r"[0-9A-Z<]\S*(?: [0-9A-Z<]\S*)*")


def _name_run(text: str) -> int:
    """The length of the run of name-like words `text` starts with (0 if none): where free text
    that copies the customer's words is released ("97217", not "97217 instead")."""
    m = _NAME_RUN.match(text)
    return m.end() if m else 0


def ends_word(value: str, rest: str) -> bool:
    """Whether a copied `value` followed in its message by `rest` ends at the end of a word."""
    return bool(value) and (value[-1].isalnum() or value[-1] == ">") and (
        not rest or not (rest[0].isalnum() or rest[0] in "_>"))


class SaidSpans:
    """The word-aligned pieces of a customer's messages: within one phrase (no comma or sentence
    mark inside), every suffix that starts at the start of a word (a letter or digit after a
    non-word character, or a reference token; never inside a reference token), sorted, so the
    suffixes a value so far begins are one range."""

    def __init__(self, said: tuple[str, ...]) -> None:
        tails: list[tuple[str, int, int]] = []
        for msg in (phrase for m in said for phrase in _PHRASE_END.split(m)):
            inside: set[int] = set()
            for m in REF_PATTERN.finditer(msg):
                inside.update(range(m.start() + 1, m.end()))
            ends = [k for k in range(1, len(msg) + 1) if k not in inside and ends_word(msg[k - 1], msg[k:])]
            for p, ch in enumerate(msg):
                if p in inside or not (ch.isalnum() or ch == "<"):
                    continue
                if ch == "<" and not REF_PATTERN.match(msg, p):
                    continue
                if p == 0 or not (msg[p - 1].isalnum() or msg[p - 1] == "_"):
                    # with the length of its longest piece that ends at the end of a word
                    tails.append((msg[p:], ends[-1] - p, _name_run(msg[p:])))
        tails.sort()
        self.tails = [t for t, _, _ in tails]
        self.lasts = [n for _, n, _ in tails]
        self.runs = [r for _, _, r in tails]

    def _range(self, value: str) -> range:
        lo = bisect.bisect_left(self.tails, value)
        hi = lo
        while hi < len(self.tails) and self.tails[hi].startswith(value):
            hi += 1
        return range(lo, hi)

    def viable(self, value: str) -> bool:
        """Whether `value` begins a piece that ends at the end of a word."""
        return any(self.lasts[i] >= len(value) for i in self._range(value))

    def complete(self, value: str) -> bool:
        """Whether `value` is a whole piece: it ends at the end of a word."""
        return any(ends_word(value, self.tails[i][len(value):]) for i in self._range(value))

    def in_run(self, value: str) -> bool:
        """Whether `value` begins the name run of a piece (`_name_run`)."""
        return any(self.runs[i] >= len(value) for i in self._range(value))

    def ends_run(self, value: str) -> bool:
        """Whether `value` is the whole name run of a piece."""
        return any(self.runs[i] == len(value) for i in self._range(value))

    def run_goes_on(self, value: str) -> bool:
        """Whether a piece's name run goes on past `value`."""
        return any(self.runs[i] > len(value) for i in self._range(value))

    def heads(self, value: str) -> set[str]:
        """The characters that continue `value` in some piece."""
        return {self.tails[i][len(value)] for i in self._range(value) if len(self.tails[i]) > len(value)}


@functools.lru_cache(maxsize=1024)
def said_spans(said: tuple[str, ...]) -> SaidSpans:
    """`SaidSpans` of `said`, cached: every copy mask of a conversation asks for the same ones."""
    return SaidSpans(said)


MIN_DIGITS = 3  # a number this long that the customer said is one they gave (a house number, a zip)
NUMBER_REF = "<num_"  # a view with references shows such numbers as `<num_N>` (rl/chat/views.py)


def held_copy(text: str, spans: SaidSpans, lookback: int = 120) -> str | None:
    """The copy a reply's free text so far (`text`) is in the middle of, or None.

    Free text that writes, at its start or after whitespace, `MIN_DIGITS` or more digits (or a
    number's reference token) beginning a piece of what the customer said goes on in the customer's
    words through the name-like words that follow it in their phrase: "4149 Sunset Boulevard", not
    "4149 Lakeview Drive"; "97217", not "97217 instead". The copy is the longest such suffix of
    `text` that a run still continues; once the run is written it is released."""
    start = max(0, len(text) - lookback)
    for p in range(start, len(text)):
        if p > 0 and not text[p - 1].isspace():
            continue
        value = text[p:]
        if not value.startswith(NUMBER_REF) and len(value) - len(value.lstrip("0123456789")) < MIN_DIGITS:
            continue
        if spans.in_run(value) and spans.run_goes_on(value):
            return value
    return None
