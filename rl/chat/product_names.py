"""Which product free text may name: one its conversation's lookups have shown. An agent's
proposal names an item as "the Water Bottle ..." (rl/policies/wording.py); a 2M-parameter model
cannot copy a product name it read once into free text, so it writes the one it saw most in
training ("the Dumbbell Set" for every return) and the customer, who checks the product names,
says no. With `copy_product_names` (rl/chat/views.py), a capitalised word after "the " in free text
begins a product name the conversation's tool results showed and runs to its end: the model still
chooses which product, but only among those it was shown (the teacher's text never puts anything
else there).

`open_slot` says whether free text so far is at or inside such a slot (a cheap test, run every
step) and returns that slot; `allowed_tokens` lists the tokens that keep it, and any slot a token
opens, a shown name."""

from __future__ import annotations

import re

ARTICLE = "the "
_ARTICLE_AT = re.compile(r"(?:^|(?<=[^0-9A-Za-z_]))the ")
LOOKBACK = 80  # longer than any product name and its article


_GOES_ON = re.compile(r" [A-Z0-9]")  # another capitalised word: the name would run past a shown one


def _fits(value: str, names: tuple[str, ...], strict: bool = False) -> bool:
    """Whether the text after an article, `value`, begins a shown name or has written one whole
    and gone on past a word's end ("Water Bottle (color", not "Water Bottles"); `strict` (inside a
    proposal template, rl/chat/proposal_template.py): and not on into another capitalised word
    ("Desk Lamp Street")."""
    if not value or not value[0].isupper():
        return True
    for n in names:
        if n.startswith(value):
            return True
        if value.startswith(n) and not (value[len(n)].isalnum() or value[len(n)] in "-_") \
                and not (strict and _GOES_ON.match(value, len(n))):
            return True
    return False


def slots_fit(text: str, names: tuple[str, ...], strict: bool = False) -> bool:
    """Whether every article slot of `text` fits a shown name (`_fits`), each read to the end of
    `text` (an earlier slot is checked again: a token may close one slot and open another)."""
    return all(_fits(text[m.end():], names, strict) for m in _ARTICLE_AT.finditer(text))


def open_slot(free: str, names: tuple[str, ...], strict: bool = False) -> str | None:
    """What the next token of free text `free` must keep fitting (`slots_fit`), or None when no
    token can open or break a slot. It is the last slot alone, from its article ("the", "the " or
    "the Wat"), the same for every conversation at that point: an earlier slot was closed by the
    character past its end, so no token can change it, and the masks are shared. A slot is open
    when `free` ends with the article (or the word "the", which a token beginning with a space
    continues), or its last slot has begun a name and not yet written a character past its end
    (`strict`: or a space past it, which a capitalised word would continue)."""
    tail = free[-LOOKBACK:]
    if tail.endswith(ARTICLE):
        return ARTICLE
    if re.search(r"(?:^|[^0-9A-Za-z_])the$", tail):
        return "the"
    last = None
    for m in _ARTICLE_AT.finditer(tail):
        last = m
    if last is None:
        return None
    value = tail[last.end():]
    if value and value[0].isupper() and any(n.startswith(value) or (strict and value == n + " ") for n in names):
        return ARTICLE + value  # a name begun, or whole: "T-Shirts" would break it, "Water Bottle Pro" may go on
    return None


def allowed_tokens(tail: str, names: tuple[str, ...], texts: list[str | None], strict: bool = False) -> list[int]:
    """The token ids (by their `texts`) that keep every slot of `tail` + token fitting a shown name
    (`tail`: an `open_slot`)."""
    return [i for i, t in enumerate(texts) if t is not None and slots_fit(tail + t, names, strict)]
