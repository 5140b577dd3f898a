"""Grammar-constrained decoding of hermes tool calls for local models: once a model writes
`<tool_call>`, each next token must keep the call one the store can run (rl/chat/call_automaton.py),
the guided decoding vLLM and llguidance give served models, small enough for the tiny recipe.
`ToolCallGrammar` turns the character automaton into per-state token masks (cached; a call visits a
few dozen states), narrows the tools and reference slots to what a conversation has shown
(`for_shown`, `shown_mask`) and holds copied values to spans of the customer's words (`copy_mask`,
rl/chat/copy_spans.py). Generation masks with it and records, per constrained token, the allowed
set and the log-prob under the masked distribution next to the unmasked one
(rl/models/generation.py), so that GRPO can train on the distribution it sampled from with a PPO
ratio of 1 on a fresh rollout either way (rl/grpo/logprobs.py). `CallConstraint`
(rl/chat/call_constraint.py) applies it row by row in batched generation."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterable
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from rl.chat.call_automaton import CallAutomaton, Schema
from rl.chat.call_constraint import CallConstraint
from rl.chat.call_states import DEAD, END, CopiedString, Reference, State
from rl.chat.copy_spans import SaidSpans, said_spans
from rl.chat.format import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from rl.chat.lru import LRUCache
from rl.chat.product_names import allowed_tokens, slots_fit
from rl.chat.proposal_template import ProposalTemplate
from rl.chat.status_answer import allowed_tokens as status_tokens
from rl.chat.status_answer import completing as refusal_completing
from rl.chat.token_masks import ids_mask
from rl.chat.views import REF_PATTERN

__all__ = ["DEAD", "END", "CallConstraint", "State", "ToolCallGrammar", "grammar_key"]
MASK_CACHE_SIZE = 4096  # per-conversation masks kept (shown references, copied values)


class _Trie:
    """The token texts by shared prefix, so a mask steps each shared prefix once and drops a whole
    subtree at its first impossible character."""

    __slots__ = ("children", "ids")

    def __init__(self) -> None:
        self.children: dict[str, _Trie] = {}
        self.ids: list[int] = []

    @classmethod
    def of(cls, texts: list[str | None]) -> _Trie:
        root = cls()
        for i, text in enumerate(texts):
            if text:
                node = root
                for ch in text:
                    child = node.children.get(ch)
                    if child is None:
                        child = node.children[ch] = cls()
                    node = child
                node.ids.append(i)
        return root


class ToolCallGrammar:
    """The automaton for the tool calls of one tool list, with per-state token masks. Special
    tokens (chat markup) are never allowed inside a call, except `text_tokens` (the view's reference
    tokens, which are text); after the closing `}}\\n` only `</tool_call>` is."""

    def __init__(self, tools: Iterable[dict[str, Any]], tokenizer: PreTrainedTokenizerBase,
                 text_tokens: Iterable[str] = (), ref_params: dict[str, str] | None = None,
                 max_string: int = 64, spaced_values: bool = False,
                 copy_params: Iterable[str] = (), needs_customer: Iterable[str] = (),
                 name_params: Iterable[str] = ()) -> None:
        # tools that only run for an identified customer (the tool layer refuses them before): with
        # references, not writable until the conversation has shown a customer id (`for_shown`)
        self.needs_customer = frozenset(needs_customer)
        self.automaton = CallAutomaton((Schema.from_tool(t) for t in tools), ref_params=ref_params,
                                       copy_params=copy_params, max_string=max_string, spaced_values=spaced_values,
                                       name_params=name_params)
        if not self.automaton.schemas:
            raise ValueError("a tool-call grammar needs at least one tool")
        self.tokenizer = tokenizer
        self.open_id = tokenizer.convert_tokens_to_ids(TOOL_CALL_OPEN)
        self.close_id = tokenizer.convert_tokens_to_ids(TOOL_CALL_CLOSE)
        self.vocab_size = len(tokenizer)
        text_tokens = list(text_tokens)
        specials = set(tokenizer.all_special_ids) - set(tokenizer.convert_tokens_to_ids(text_tokens))
        self.texts: list[str | None] = [
            None if i in specials else tokenizer.decode([i], skip_special_tokens=False,
                                                        clean_up_tokenization_spaces=False)
            for i in range(self.vocab_size)]
        self._trie = _Trie.of(self.texts)
        # reference token -> its id, for the references the tokenizer holds whole
        self.ref_ids: dict[str, int] = {t: i for t, i in zip(text_tokens, tokenizer.convert_tokens_to_ids(text_tokens),
                                                              strict=True)
                                        if REF_PATTERN.fullmatch(t) and i is not None and i < self.vocab_size}
        self._subsets: dict[frozenset[str], ToolCallGrammar] = {}
        # shared with the subsets (same token texts)
        self._templates: dict[tuple[bool, bool, bool], ProposalTemplate] = {}
        self._reset_caches()

    def _reset_caches(self) -> None:
        self._masks: dict[State, torch.Tensor] = {}
        self._next: dict[tuple[State, int], State] = {}
        self._entering: dict[State, list[int]] = {}  # per state, the tokens that enter a copied value
        # per (call state, or None for free text; value so far; the customer's messages)
        self._copy_masks: LRUCache[tuple[State | None, str, tuple[str, ...]], torch.Tensor | None] = \
            LRUCache(MASK_CACHE_SIZE)
        self._shown_masks: LRUCache[tuple[str, frozenset[str]], torch.Tensor | None] = LRUCache(MASK_CACHE_SIZE)

    # ------------------------------------------------------------------ the automaton's settings
    @property
    def schemas(self) -> dict[str, Schema]:
        return self.automaton.schemas

    @property
    def ref_params(self) -> dict[str, str]:
        return self.automaton.ref_params

    @property
    def copy_params(self) -> frozenset[str]:
        return self.automaton.copy_params

    @property
    def max_string(self) -> int:
        return self.automaton.max_string

    @property
    def spaced_values(self) -> bool:
        return self.automaton.spaced_values

    # ------------------------------------------------------------------ what a conversation has shown
    def needs(self, tool: str) -> frozenset[str]:
        """The reference kinds a call of `tool` cannot be written without (its required
        identifier parameters)."""
        schema = self.schemas[tool]
        return frozenset(self.ref_params[k] for k in schema.required if k in self.ref_params)

    def for_shown(self, refs: frozenset[str] | None) -> ToolCallGrammar:
        """This grammar with only the tools a conversation that has shown `refs` can call (every
        required identifier has a reference of its kind): identifiers are copied, never invented;
        and, until a customer id has been shown (an identity tool found the customer), none of
        `needs_customer`: a call the tool layer would refuse is never written. Itself when `refs`
        is None or nothing is left out. Cached per set of callable tools; the subset shares the
        token texts."""
        if refs is None or not self.ref_params:
            return self
        kinds = {m.group(1) for r in refs if (m := REF_PATTERN.fullmatch(r))}
        names = frozenset(n for n in self.schemas if self.needs(n) <= kinds
                          and ("user" in kinds or n not in self.needs_customer))
        return self._subset(names)

    def without(self, tools: frozenset[str]) -> ToolCallGrammar:
        """This grammar with none of `tools` callable (a view with `writes_after_proposal` takes
        the write tools away until the agent has asked the customer to confirm). Itself when none
        of them is offered or nothing else would be left; cached like `for_shown`."""
        return self._subset(frozenset(self.schemas) - tools)

    def _subset(self, names: frozenset[str]) -> ToolCallGrammar:
        """This grammar with only `names` callable (itself for all of them, or for none)."""
        if names == frozenset(self.schemas) or not names:
            return self
        sub = self._subsets.get(names)
        if sub is None:
            sub = copy.copy(self)
            sub.automaton = self.automaton.restricted(names)
            sub._subsets = {}
            sub._reset_caches()
            self._subsets[names] = sub
        return sub

    @staticmethod
    def ref_slot(state: State) -> str | None:
        """The reference kind when `state` is at the start of an identifier's reference, else None."""
        if isinstance(state, Reference) and not state.digits and state.head.startswith("<"):
            return state.head[1:-1]
        return None

    def shown_mask(self, kind: str, refs: frozenset[str]) -> torch.Tensor | None:
        """Mask of the shown references of `kind` the tokenizer holds whole (None: none shown);
        cached, as generation asks for it at every identifier slot of every row."""
        def make() -> torch.Tensor | None:
            ids = [self.ref_ids[r] for r in refs if r in self.ref_ids and r.startswith(f"<{kind}_")]
            return ids_mask(ids, self.vocab_size) if ids else None

        return self._shown_masks.get_or_make((kind, refs), make)

    def unshown_ids(self, refs: frozenset[str]) -> torch.Tensor | None:
        """The ids of the reference tokens the tokenizer holds whole that are not in `refs` (None:
        every one is shown); for masking them in free text (`CallConstraint`'s `text_refs`). Cached
        with the shown masks, as every agent turn asks for it."""
        def make() -> torch.Tensor | None:
            ids = [i for r, i in self.ref_ids.items() if r not in refs]
            return torch.tensor(ids, dtype=torch.long) if ids else None

        return self._shown_masks.get_or_make(("unshown", refs), make)

    def proposal_template(self, payment_refs: bool, item_refs: bool = False,
                          item_options: bool = False) -> ProposalTemplate:
        """The proposal templates over this grammar's tokens (rl/chat/proposal_template.py `templates`);
        built once per setting and shared with its subsets."""
        key = (payment_refs, item_refs, item_options)
        template = self._templates.get(key)
        if template is None:
            template = self._templates[key] = ProposalTemplate(self.texts, self._trie, *key)
        return template

    # ------------------------------------------------------------------ copied values
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
        what the customer `said` (rl/chat/copy_spans.py); tokens that write no copied character pass.
        None when `state` neither is in nor leads into a copied value within a token, or when no
        token would be left (the syntactic mask alone then applies). Cached per (state, value,
        messages), least recently used dropped first."""
        return self._copy_masks.get_or_make((state, value, said), lambda: self._make_copy_mask(state, value, said))

    def _make_copy_mask(self, state: State, value: str, said: tuple[str, ...]) -> torch.Tensor | None:
        spans = said_spans(said)
        inside = isinstance(state, CopiedString)
        if inside:  # only tokens that start with a character the spans continue with
            candidates = [i for ch in (*spans.heads(value), '"') for i in self._by_first.get(ch, ())]
        else:
            candidates = self._into_copy(state)
        if not candidates:
            return None
        allowed = self.allowed(state)
        syntax = allowed.tolist()
        keep = [i for i in candidates if syntax[i] and self._copies_spans(state, value, self.texts[i] or "", spans)]
        if not keep:
            return None
        # in a value only the kept tokens; before one, the kept ones among those entering it
        mask = torch.zeros(self.vocab_size, dtype=torch.bool) if inside else allowed.clone()
        mask[candidates] = False
        mask[keep] = True
        return mask

    def product_mask(self, slot: str, names: tuple[str, ...], strict: bool = False) -> torch.Tensor | None:
        """For free text at or inside a product slot (`slot`, from its article: rl/chat/
        product_names.py `open_slot`), the tokens that keep it naming one of `names`; a token with
        no text (an end of turn) only where no name has begun. None when no token would (then the
        text is free). `strict`: a whole name does not go on into another capitalised word
        (`product_names._fits`). Cached like `copy_mask`."""
        return self._copy_masks.get_or_make((None, ("strict:" if strict else "products:") + slot, names),
                                            lambda: self._make_product_mask(slot, names, strict))

    def _make_product_mask(self, slot: str, names: tuple[str, ...], strict: bool = False) -> torch.Tensor | None:
        keep = allowed_tokens(slot, names, self.texts, strict)
        if slots_fit(slot, ()):  # no name begun: a turn may end, a special token follow
            keep += [i for i, t in enumerate(self.texts) if t is None]
        return ids_mask(keep, self.vocab_size) if keep else None

    def status_mask(self, value: str, statuses: frozenset[str]) -> torch.Tensor | None:
        """For free text at or inside a status slot holding `value` (rl/chat/status_answer.py
        `open_slot`), the tokens that keep it on its way to one of `statuses`; None when no token
        would (then the text is free). Cached like `copy_mask`."""
        def make() -> torch.Tensor | None:
            keep = status_tokens(value, statuses, self.texts)
            return ids_mask(keep, self.vocab_size) if keep else None

        return self._copy_masks.get_or_make((None, "status:" + value, tuple(sorted(statuses))), make)

    def refusal_hold_mask(self, done: int) -> torch.Tensor | None:
        """The tokens free text ending with the first `done` characters of "is already" may write when
        the order it names has no status a refusal may give it: all but those completing the phrase
        (rl/chat/status_answer.py `completing`); None when none would. Cached like `copy_mask`."""
        def make() -> torch.Tensor | None:
            held = refusal_completing(done, self.texts)
            return ~ids_mask(held, self.vocab_size) if held else None

        return self._copy_masks.get_or_make((None, f"refusal:{done}", ()), make)

    def text_copy_mask(self, value: str, said: tuple[str, ...]) -> torch.Tensor | None:
        """For free text in the middle of copying `value` (`held_copy`, rl/chat/copy_spans.py), the
        tokens that go on copying the name run of a piece of what the customer `said`, or finish it
        and write on after it (None when no token would; then the text is free). Cached like
        `copy_mask`."""
        return self._copy_masks.get_or_make((None, value, said), lambda: self._make_text_copy_mask(value, said))

    def _make_text_copy_mask(self, value: str, said: tuple[str, ...]) -> torch.Tensor | None:
        spans = said_spans(said)
        keep = []
        for i in (i for ch in spans.heads(value) for i in self._by_first.get(ch, ())):
            text = self.texts[i] or ""
            for k in range(1, len(text) + 1):
                if not spans.in_run(value + text[:k]):
                    break
                if k < len(text) and spans.ends_run(value + text[:k]):
                    keep.append(i)  # it finishes the copy and writes on after it
                    break
            else:
                keep.append(i)
        return ids_mask(keep, self.vocab_size) if keep else None

    def _into_copy(self, state: State) -> list[int]:
        """The allowed tokens whose text enters a copied value from `state` (cached per state)."""
        if state not in self._entering:
            ids = []
            if self.copy_params:
                step = self.automaton.step
                for i in self.allowed(state).nonzero().flatten().tolist():
                    s = state
                    for ch in self.texts[i] or "":
                        s = step(s, ch)
                        if isinstance(s, CopiedString):
                            ids.append(i)
                            break
            self._entering[state] = ids
        return self._entering[state]

    def _copies_spans(self, state: State, value: str, text: str, spans: SaidSpans) -> bool:
        """Whether writing `text` from `state` keeps each copied value a word-aligned span."""
        step = self.automaton.step
        for ch in text:
            inside = isinstance(state, CopiedString)
            if inside:
                if ch == '"':
                    if value and not spans.complete(value):
                        return False
                else:  # the value must still be able to end at the end of a word
                    value += ch
                    if not spans.viable(value):
                        return False
            nxt = step(state, ch)
            if isinstance(nxt, CopiedString) and not inside:
                value = ""
            state = nxt
            if state is DEAD:
                return False
        return True

    # ------------------------------------------------------------------ token level
    def start(self) -> State:
        """The state right after `<tool_call>`."""
        return self.automaton.start()

    def allowed(self, state: State) -> torch.Tensor:
        """Boolean mask over the vocabulary: the tokens that keep a call in `state` well formed."""
        mask = self._masks.get(state)
        if mask is None:
            ids = [self.close_id] if state is END else [] if state is DEAD else self._alive_ids(state)
            mask = self._masks[state] = ids_mask(ids, self.vocab_size)
        return mask

    def _alive_ids(self, state: State) -> list[int]:
        """The tokens whose whole text keeps the automaton alive from `state` (a walk of the token
        trie that drops a subtree at its first impossible character)."""
        step = self.automaton.step
        out: list[int] = []
        stack = [(self._trie, state)]
        while stack:
            node, s = stack.pop()
            for ch, child in node.children.items():
                nxt = step(s, ch)
                if nxt is DEAD:
                    continue
                out.extend(child.ids)
                if child.children:
                    stack.append((child, nxt))
        return out

    def advance(self, state: State, token_id: int) -> State:
        """The state after the model wrote `token_id` (END once the body is complete, DEAD if the
        token was not allowed)."""
        key = (state, token_id)
        nxt = self._next.get(key)
        if nxt is None:
            text = self.texts[token_id] if 0 <= token_id < self.vocab_size else None
            nxt = DEAD if text is None or state is END else self.automaton.consume(state, text)
            self._next[key] = nxt
        return nxt

    # ------------------------------------------------------------------ character level
    def consume(self, state: State, text: str) -> State:
        return self.automaton.consume(state, text)

    def step(self, state: State, ch: str) -> State:
        return self.automaton.step(state, ch)


def grammar_key(tools: list[dict[str, Any]]) -> str:
    return json.dumps(tools, sort_keys=True)
