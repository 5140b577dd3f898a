"""Grammar-constrained decoding of hermes tool calls for local models.

Once a local model writes `<tool_call>`, what follows must be a call the store can run: the exact
layout `render_tool_call` writes (`\\n{"name": "NAME", "arguments": {...}}\\n` then `</tool_call>`),
a tool name from the offered list, only that tool's parameter names, each at most once, every
required one before the closing brace, values of the declared JSON type: strings of at most
`max_string` characters without quotes, backslashes, control characters or a token that holds only
part of a UTF-8 character; an `enum` spelled exactly; arrays of strings; JSON numbers; booleans.
With `spaced_values` (the view's option) a free-text string value starts with one space.
Parameters in `copy_params` (the view's `copied_params`: a new address's lines, city, state and
country, a customer's names) take a value the customer said: `CallConstraint` holds them to a span of the customer's
messages as the model was shown them, starting at the start of a word, closing only at the end of
one and crossing no comma or sentence mark (or empty, for an address line the customer has none
of). A 2M-parameter model that must
write `"city": " Columbus"` after "... Apt 11, Columbus, OH ..." wrote other streets and cities in
every held-out address change (bench/results/README.md); picking where to copy from is what it can
learn, spelling a string it has read once is not.
With a view that shows identifiers as references (rl/chat/views.py), a parameter the view maps to
a reference kind (`order_id` -> `<order_N>`, ...) takes exactly one reference of that kind. This is
the guided decoding vLLM and llguidance offer for served models (REFERENCE.md, vLLM structured
outputs), written small enough for the tiny recipe: the paper-table cold-start model wrote 168 of
its 445 held-out tool calls as JSON that did not parse, and under sampling half of them.

`ToolCallGrammar` is a character-level automaton over the call body whose states are hashable
tuples; `allowed(state)` is the mask of tokens whose whole text keeps the automaton alive, computed
once per state and cached (a tool call visits a few dozen states; the tiny vocabulary makes a new
state cost a few milliseconds). Special tokens (chat markup) are never allowed inside a call,
except the view's reference tokens (`<order_1>`, ...), which are text; after the closing `}}\\n`
only `</tool_call>` is.

Identifiers are copied, never invented: `for_shown(refs)` gives the grammar restricted to what one
conversation has shown. Its tool list keeps only the tools whose required identifier parameters
each have a reference of their kind in the conversation (no `get_order_details` before any order
was named), and in an identifier slot only the references shown are allowed (`<order_2>` when the
customer named two orders, not `<order_7>`). Without references (`refs=None`) the grammar is the
plain one above.

Generation applies the mask when choosing the token and keeps the log-prob of the unmasked
distribution (`rl/models/generation.py`): the trainer recomputes exactly that, so the PPO ratio of
a fresh rollout is 1; the constraint changes which tokens are sampled, not how they are scored.
"""

from __future__ import annotations

import bisect
import copy
import functools
import json
import re
from collections.abc import Iterable
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from rl.chat.format import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from rl.chat.views import REF_PATTERN

State = tuple[Any, ...]
DEAD: State = ("dead",)
END: State = ("end",)
_STRING_BANNED = frozenset('"\\')
_NUMBER_ENDS = frozenset({"zero", "int", "frac", "expd"})


def _number_step(phase: str, ch: str, integer: bool) -> str | None:
    """JSON number syntax, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, one character at a time
    (integers: no fraction or exponent). Returns the next phase, or None."""
    digit = ch.isascii() and ch.isdigit()
    if phase in ("start", "sign"):
        if ch == "-" and phase == "start":
            return "sign"
        return "zero" if ch == "0" else "int" if digit else None
    if phase in ("zero", "int") and not integer and ch == ".":
        return "dot"
    if phase in ("zero", "int", "frac") and not integer and ch in "eE":
        return "exp"
    if phase == "int" and digit:
        return "int"
    if phase in ("dot", "frac") and digit:
        return "frac"
    if phase == "exp" and ch in "+-":
        return "expsign"
    if phase in ("exp", "expsign", "expd") and digit:
        return "expd"
    return None


_PHRASE_END = re.compile(r"[,.;:!?\n]")  # a copied value never crosses one: "Austin", not "Austin, TX"


class _Spans:
    """The word-aligned pieces of a customer's messages, for copied values: within one phrase (no
    comma or sentence mark inside), every suffix that starts at the start of a word (a letter or
    digit after a non-word character, or a reference token; never inside a reference token),
    sorted, so the suffixes a value so far begins are one range."""

    def __init__(self, said: tuple[str, ...]) -> None:
        tails: list[tuple[str, int]] = []
        for msg in (phrase for m in said for phrase in _PHRASE_END.split(m)):
            inside: set[int] = set()
            for m in REF_PATTERN.finditer(msg):
                inside.update(range(m.start() + 1, m.end()))
            ends = [k for k in range(1, len(msg) + 1) if k not in inside and _ends_word(msg[k - 1], msg[k:])]
            for p, ch in enumerate(msg):
                if p in inside or not (ch.isalnum() or ch == "<"):
                    continue
                if ch == "<" and not REF_PATTERN.match(msg, p):
                    continue
                if p == 0 or not (msg[p - 1].isalnum() or msg[p - 1] == "_"):
                    # with the length of its longest piece that ends at the end of a word
                    tails.append((msg[p:], ends[-1] - p))
        tails.sort()
        self.tails = [t for t, _ in tails]
        self.lasts = [n for _, n in tails]

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
        return any(_ends_word(value, self.tails[i][len(value):]) for i in self._range(value))

    def heads(self, value: str) -> set[str]:
        """The characters that continue `value` in some piece."""
        return {self.tails[i][len(value)] for i in self._range(value) if len(self.tails[i]) > len(value)}


@functools.lru_cache(maxsize=1024)
def _spans(said: tuple[str, ...]) -> _Spans:
    return _Spans(said)


def _ends_word(value: str, rest: str) -> bool:
    """Whether a copied `value` followed in its message by `rest` ends at the end of a word."""
    return bool(value) and (value[-1].isalnum() or value[-1] == ">") and (
        not rest or not (rest[0].isalnum() or rest[0] in "_>"))


class Schema:
    """What the grammar needs of one tool: parameter kinds, required ones and enums."""

    def __init__(self, tool: dict[str, Any]) -> None:
        fn = tool.get("function", tool)
        self.name: str = fn["name"]
        params = fn.get("parameters") or {}
        props = params.get("properties")
        if props is None and isinstance(params, dict):  # a compact schema: {"param": "type"}
            props = {k: {"type": "array" if str(v).startswith("array") else v} for k, v in params.items()}
        self.kinds: dict[str, str] = {}
        self.enums: dict[str, tuple[str, ...]] = {}
        for key, spec in (props or {}).items():
            kind = spec.get("type", "string") if isinstance(spec, dict) else "string"
            self.kinds[key] = kind if kind in ("string", "array", "number", "integer", "boolean") else "string"
            enum = spec.get("enum") if isinstance(spec, dict) else None
            if enum and all(isinstance(e, str) for e in enum):
                self.enums[key] = tuple(enum)
        self.required: frozenset[str] = frozenset(params.get("required") or []) & frozenset(self.kinds)


class ToolCallGrammar:
    """The automaton for the tool calls of one tool list, with per-state token masks."""

    def __init__(self, tools: Iterable[dict[str, Any]], tokenizer: PreTrainedTokenizerBase,
                 text_tokens: Iterable[str] = (), ref_params: dict[str, str] | None = None,
                 max_string: int = 64, spaced_values: bool = False,
                 copy_params: Iterable[str] = ()) -> None:
        self.schemas = {s.name: s for s in (Schema(t) for t in tools)}
        self.copy_params = frozenset(copy_params)  # free-text parameters copied from the customer's words
        self.tokenizer = tokenizer
        self.ref_params = dict(ref_params or {})  # parameter -> reference kind its value must be
        self.max_string = max_string
        self.spaced_values = spaced_values  # free-text string values start with one space
        if not self.schemas:
            raise ValueError("a tool-call grammar needs at least one tool")
        self.open_id = tokenizer.convert_tokens_to_ids(TOOL_CALL_OPEN)
        self.close_id = tokenizer.convert_tokens_to_ids(TOOL_CALL_CLOSE)
        self.vocab_size = len(tokenizer)
        text_tokens = list(text_tokens)
        specials = set(tokenizer.all_special_ids) - set(tokenizer.convert_tokens_to_ids(text_tokens))
        self.texts: list[str | None] = [
            None if i in specials else tokenizer.decode([i], skip_special_tokens=False,
                                                        clean_up_tokenization_spaces=False)
            for i in range(self.vocab_size)]
        # reference token -> its id, for the references the tokenizer holds whole
        self.ref_ids: dict[str, int] = {t: i for t, i in zip(text_tokens, tokenizer.convert_tokens_to_ids(text_tokens),
                                                              strict=True)
                                        if REF_PATTERN.fullmatch(t) and i is not None and i < self.vocab_size}
        self._copy_masks: dict[tuple[State, str, tuple[str, ...]], torch.Tensor | None] = {}
        self._entering: dict[State, list[int]] = {}  # per state, the tokens that enter a copied value
        self._masks: dict[State, torch.Tensor] = {}
        self._next: dict[tuple[State, int], State] = {}
        self._subsets: dict[frozenset[str], ToolCallGrammar] = {}
        self._shown_masks: dict[tuple[str, frozenset[str]], torch.Tensor | None] = {}

    # ------------------------------------------------------------------ what a conversation has shown
    def needs(self, tool: str) -> frozenset[str]:
        """The reference kinds a call of `tool` cannot be written without (its required
        identifier parameters)."""
        schema = self.schemas[tool]
        return frozenset(self.ref_params[k] for k in schema.required if k in self.ref_params)

    def for_shown(self, refs: frozenset[str] | None) -> ToolCallGrammar:
        """This grammar with only the tools a conversation that has shown `refs` can call (every
        required identifier has a reference of its kind); itself when `refs` is None or nothing is
        left out. Cached per set of callable tools; the subset shares the token texts."""
        if refs is None or not self.ref_params:
            return self
        kinds = {m.group(1) for r in refs if (m := REF_PATTERN.fullmatch(r))}
        names = frozenset(n for n in self.schemas if self.needs(n) <= kinds)
        if names == frozenset(self.schemas) or not names:
            return self
        sub = self._subsets.get(names)
        if sub is None:
            sub = copy.copy(self)
            sub.schemas = {n: s for n, s in self.schemas.items() if n in names}
            sub._masks, sub._next, sub._subsets, sub._shown_masks = {}, {}, {}, {}
            sub._copy_masks, sub._entering = {}, {}
            self._subsets[names] = sub
        return sub

    @staticmethod
    def ref_slot(state: State) -> str | None:
        """The reference kind when `state` is at the start of an identifier's reference, else None."""
        if state[0] == "ref" and not state[2] and state[1].startswith("<"):
            return state[1][1:-1]
        return None

    def shown_mask(self, kind: str, refs: frozenset[str]) -> torch.Tensor | None:
        """Mask of the shown references of `kind` the tokenizer holds whole (None: none shown);
        cached, as generation asks for it at every identifier slot of every row."""
        key = (kind, refs)
        if key not in self._shown_masks:
            if len(self._shown_masks) >= 4096:  # one entry per conversation state: keep it bounded
                self._shown_masks.clear()
            ids = [self.ref_ids[r] for r in refs if r in self.ref_ids and r.startswith(f"<{kind}_")]
            mask = None
            if ids:
                mask = torch.zeros(self.vocab_size, dtype=torch.bool)
                mask[ids] = True
            self._shown_masks[key] = mask
        return self._shown_masks[key]

    def unshown_ids(self, refs: frozenset[str]) -> torch.Tensor | None:
        """The ids of the reference tokens the tokenizer holds whole that are not in `refs` (None:
        every one is shown); for masking them in free text (`CallConstraint`'s `text_refs`). Cached
        with the shown masks, as every agent turn asks for it."""
        key = ("unshown", refs)
        if key not in self._shown_masks:
            if len(self._shown_masks) >= 4096:
                self._shown_masks.clear()
            ids = [i for r, i in self.ref_ids.items() if r not in refs]
            self._shown_masks[key] = torch.tensor(ids, dtype=torch.long) if ids else None
        return self._shown_masks[key]

    @functools.cached_property
    def _by_first(self) -> dict[str, list[int]]:
        """Token ids by their text's first character, for the copy filter (built on first use, so a
        grammar without copied parameters never pays for it)."""
        out: dict[str, list[int]] = {}
        for i, text in enumerate(self.texts):
            if text:
                out.setdefault(text[0], []).append(i)
        return out

    def copy_mask(self, state: State, value: str, said: tuple[str, ...]) -> torch.Tensor | None:
        """For a call in `state` (having written `value` of a copied value when `state` is inside
        one), the tokens the syntax allows whose copied characters keep every copied value a span of
        what the customer `said`: a piece of one message that starts at the start of a word, closed
        only where that piece ends at the end of a word (or right away: an empty value, for an
        address line the customer has none of). Tokens that write no copied character pass. None
        when `state` neither is in nor leads into a copied value within a token, or when no token
        would be left (the syntactic mask alone then applies). Cached per (state, value, messages),
        bounded."""
        key = (state, value, said)
        if key in self._copy_masks:
            return self._copy_masks[key]
        if len(self._copy_masks) >= 4096:
            self._copy_masks.clear()
        spans = _spans(said)
        if state[0] == "copy":  # only tokens that start with a character the spans continue with
            candidates = [i for ch in (*spans.heads(value), '"') for i in self._by_first.get(ch, ())]
        else:
            candidates = self._into_copy(state)
        mask: torch.Tensor | None = None
        if candidates:
            allowed = self.allowed(state)
            syntax = allowed.tolist()
            keep = [i for i in candidates
                    if syntax[i] and self._copies_spans(state, value, self.texts[i] or "", spans)]
            if keep:  # in a value only the kept tokens; before one, the kept ones among those entering it
                mask = torch.zeros(self.vocab_size, dtype=torch.bool) if state[0] == "copy" else allowed.clone()
                mask[candidates] = False
                mask[keep] = True
        self._copy_masks[key] = mask
        return mask

    def _into_copy(self, state: State) -> list[int]:
        """The allowed tokens whose text enters a copied value from `state` (cached per state)."""
        if state not in self._entering:
            ids = []
            if self.copy_params:
                for i in self.allowed(state).nonzero().flatten().tolist():
                    s = state
                    for ch in self.texts[i] or "":
                        s = self.step(s, ch)
                        if s[0] == "copy":
                            ids.append(i)
                            break
            self._entering[state] = ids
        return self._entering[state]

    def _copies_spans(self, state: State, value: str, text: str, spans: _Spans) -> bool:
        """Whether writing `text` from `state` keeps each copied value a word-aligned span."""
        for ch in text:
            if state[0] == "copy":
                if ch == '"':
                    if value and not spans.complete(value):
                        return False
                else:  # the value must still be able to end at the end of a word
                    value += ch
                    if not spans.viable(value):
                        return False
            nxt = self.step(state, ch)
            if nxt[0] == "copy" and state[0] != "copy":
                value = ""
            state = nxt
            if state == DEAD:
                return False
        return True

    # ------------------------------------------------------------------ token level
    def start(self) -> State:
        """The state right after `<tool_call>`."""
        return ("lit", '\n{"name": "', ("name", ""))

    def allowed(self, state: State) -> torch.Tensor:
        """Boolean mask over the vocabulary: the tokens that keep a call in `state` well formed."""
        mask = self._masks.get(state)
        if mask is None:
            mask = torch.zeros(self.vocab_size, dtype=torch.bool)
            if state == END:
                mask[self.close_id] = True
            elif state != DEAD:
                for i, text in enumerate(self.texts):
                    if text and self.consume(state, text) != DEAD:
                        mask[i] = True
            self._masks[state] = mask
        return mask

    def advance(self, state: State, token_id: int) -> State:
        """The state after the model wrote `token_id` (END once the body is complete, DEAD if the
        token was not allowed)."""
        key = (state, token_id)
        nxt = self._next.get(key)
        if nxt is None:
            text = self.texts[token_id] if 0 <= token_id < self.vocab_size else None
            nxt = DEAD if text is None or state == END else self.consume(state, text)
            self._next[key] = nxt
        return nxt

    # ------------------------------------------------------------------ character level
    def consume(self, state: State, text: str) -> State:
        for ch in text:
            state = self.step(state, ch)
            if state == DEAD:
                return DEAD
        return state

    def step(self, state: State, ch: str) -> State:  # noqa: C901 - one branch per automaton phase
        kind = state[0]
        if kind == "lit":
            _, rest, then = state
            if ch != rest[0]:
                return DEAD
            return ("lit", rest[1:], then) if len(rest) > 1 else then
        if kind == "name":
            prefix = state[1]
            if ch == '"':
                return ("lit", ', "arguments": {', ("args", prefix, frozenset(), True)) \
                    if prefix in self.schemas else DEAD
            longer = prefix + ch
            return ("name", longer) if any(n.startswith(longer) for n in self.schemas) else DEAD
        if kind == "args":
            _, tool, used, first = state
            schema = self.schemas[tool]
            if ch == "}":
                return ("lit", "}\n", END) if schema.required <= used else DEAD
            if first and ch == '"' and set(schema.kinds) - used:
                return ("key", tool, used, "")
            if not first and ch == "," and set(schema.kinds) - used:
                return ("lit", ' "', ("key", tool, used, ""))
            return DEAD
        if kind == "key":
            _, tool, used, prefix = state
            free = [k for k in self.schemas[tool].kinds if k not in used]
            if ch == '"':
                return ("lit", ": ", ("value", tool, used | {prefix}, prefix)) if prefix in free else DEAD
            longer = prefix + ch
            return ("key", tool, used, longer) if any(k.startswith(longer) for k in free) else DEAD
        if kind == "value":
            _, tool, used, key = state
            after = ("args", tool, used, False)
            return self._value_start(self.schemas[tool], key, ch, after)
        if kind == "str":
            _, enum, prefix, after = state
            if ch == '"':
                return after if enum is None or prefix in enum else DEAD
            if ch in _STRING_BANNED or ch < " " or ch == "\ufffd":
                return DEAD  # JSON needs these escaped; U+FFFD: a token holding part of a UTF-8 character
            if enum is None:  # free text, `prefix` is its length so far
                return ("str", None, prefix + 1, after) if prefix < self.max_string else DEAD
            longer = prefix + ch
            return ("str", enum, longer, after) if any(e.startswith(longer) for e in enum) else DEAD
        if kind == "copy":  # free text copied from the customer's words: its syntax is free text's (the span is
            nxt = self.step(("str", None, state[1], state[2]), ch)  # checked per row, CallConstraint)
            return ("copy", nxt[2], nxt[3]) if nxt[0] == "str" else nxt
        if kind == "ref":  # a reference token of one kind: `<order_` digits `>` then the closing quote
            _, head, digits, after = state
            if head:
                return ("ref", head[1:], False, after) if ch == head[0] else DEAD
            if ch.isascii() and ch.isdigit():
                return ("ref", "", True, after)
            return ("lit", '"', after) if ch == ">" and digits else DEAD
        if kind == "arr":
            _, after, first, ref = state
            if ch == "]":
                return after
            item = ("arr", after, False, ref)
            string = ("ref", f"<{ref}_", False, item) if ref else ("str", None, 0, item)
            if first and ch == '"':
                return string
            if not first and ch == ",":
                return ("lit", ' "', string)
            return DEAD
        if kind == "num":
            _, phase, integer, after = state
            nxt = _number_step(phase, ch, integer)
            if nxt is not None:
                return ("num", nxt, integer, after)
            if phase in _NUMBER_ENDS:
                return self.step(after, ch)  # the number ended: the character belongs to what follows
            return DEAD
        return DEAD

    def _value_start(self, schema: Schema, key: str, ch: str, after: State) -> State:
        kind = schema.kinds[key]
        ref = self.ref_params.get(key)
        if kind == "string":
            if ch != '"':
                return DEAD
            if ref:
                return ("ref", f"<{ref}_", False, after)
            enum = schema.enums.get(key)
            value: State = ("str", enum, "", after) if enum else (
                ("copy", 0, after) if key in self.copy_params else ("str", None, 0, after))
            return ("lit", " ", value) if self.spaced_values else value
        if kind == "array":
            return ("arr", after, True, ref) if ch == "[" else DEAD
        if kind in ("number", "integer"):
            phase = _number_step("start", ch, kind == "integer")
            return ("num", phase, kind == "integer", after) if phase else DEAD
        if kind == "boolean":
            for word in ("true", "false"):
                if ch == word[0]:
                    return ("lit", word[1:], after)
            return DEAD
        return DEAD


class CallConstraint:
    """Per-row constraint state for batched generation: rows outside a tool call are free; a row
    that writes `<tool_call>` is held to its grammar until it writes `</tool_call>`. With `shown`
    (per row, the references its conversation has shown, or None), a row's call is held to
    `grammar.for_shown(refs)` and its identifier slots to the references shown. With `said` (per
    row, the customer's messages as the model read them), a value of a copied parameter is held to
    a span of them (`ToolCallGrammar.copy_mask`). With `text_refs`, a row outside a call (its
    free text: a proposal, an answer) may write only the reference tokens its conversation has
    shown: a model that says "cancel order `<order_2>`" when only `<order_1>` was named names an
    order nobody mentioned (the cold start did in 58 of 105 held-out episodes; bench/results/README.md)."""

    def __init__(self, grammars: list[ToolCallGrammar | None],
                 shown: list[frozenset[str] | None] | None = None,
                 said: list[tuple[str, ...]] | None = None, text_refs: bool = False) -> None:
        self.shown = list(shown) if shown is not None else [None] * len(grammars)
        self.said = list(said) if said is not None else [()] * len(grammars)
        if len(self.shown) != len(grammars) or len(self.said) != len(grammars):
            raise ValueError("one set of shown references and one of customer messages per row")
        self.grammars = [g.for_shown(r) if g is not None else None for g, r in zip(grammars, self.shown, strict=True)]
        self.states: list[State | None] = [None] * len(grammars)
        self.written = [""] * len(grammars)  # the text of each row's open call so far
        # per row, the reference tokens its free text may not write (those not shown), or None
        self.unshown: list[torch.Tensor | None] = [
            g.unshown_ids(r) if text_refs and g is not None and r is not None else None
            for g, r in zip(self.grammars, self.shown, strict=True)]

    def mask_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """`logits` with the tokens a constrained row may not write set to -inf (a copy, or the
        same tensor when no row is inside a call and no free-text row has references to hide)."""
        rows = [i for i, s in enumerate(self.states) if s is not None]
        free = [i for i, s in enumerate(self.states) if s is None and self.unshown[i] is not None]
        if not rows and not free:
            return logits
        out = logits.clone()
        for i in free:
            ids = self.unshown[i]
            assert ids is not None
            out[i, ids.to(out.device)] = float("-inf")
        for i in rows:
            g, s = self.grammars[i], self.states[i]
            assert g is not None and s is not None
            allowed = g.allowed(s)
            refs, kind = self.shown[i], g.ref_slot(s)
            if refs is not None and kind is not None:
                only = g.shown_mask(kind, refs)
                if only is not None:
                    allowed = allowed & only
            if self.said[i] and g.copy_params:
                value = self.written[i][len(self.written[i]) - s[1]:] if s[0] == "copy" else ""
                copied = g.copy_mask(s, value, self.said[i])
                if copied is not None and bool((allowed & copied).any()):
                    allowed = allowed & copied
            allowed = allowed.to(out.device)
            if bool(allowed.any()):
                out[i, : allowed.shape[0]].masked_fill_(~allowed, float("-inf"))
                out[i, allowed.shape[0]:] = float("-inf")
        return out

    def update(self, row: int, token_id: int) -> None:
        g = self.grammars[row]
        if g is None:
            return
        s = self.states[row]
        if s is None:
            if token_id == g.open_id:
                self.states[row], self.written[row] = g.start(), ""
        elif token_id == g.close_id:
            self.states[row] = None
        else:
            self.states[row] = g.advance(s, token_id)
            if 0 <= token_id < g.vocab_size:
                self.written[row] += g.texts[token_id] or ""


def grammar_key(tools: list[dict[str, Any]]) -> str:
    return json.dumps(tools, sort_keys=True)
