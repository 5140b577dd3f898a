"""The proposal's wording as a grammar: once an agent's free text writes "To confirm, I will", the
rest of its request for a yes follows one of the forms the cold-start teacher uses
(rl/policies/wording.py `proposal`), and the model chooses only what fills their slots.

A 2M-parameter model learns the teacher's proposals well enough to write them greedily, but a
sampled one breaks on the way ("with the refund going to the refund going to ...", a cancellation
reason in made-up words, an address whose city wandered off), the customer says no, and the model
writes anyway: every return and address rollout GRPO sampled scored 0 for that reason
(bench/results/README.md, `dev-confirm`). With the view's `proposal_template` the template's fixed
words are forced (a forced token carries no gradient under `constrained_logprobs`) and the slots are
held to what fits them:

- the action: one of the store's write actions, worded as the teacher words it;
- an order or a payment method (with `payment_refs`): a reference token (free text names only
  shown ones, `shown_refs_in_text`);
- a cancellation reason: one of the two the store takes;
- items: "the Name", up to three capitalised words, joined as the teacher joins them (with
  `copy_product_names` a shown product's name, ending where it does), with options in parentheses
  where the view shows them and for the new variants of a swap;
- a new address: comma-separated pieces, each (with the customer's messages) a span of what the
  customer said (rl/chat/copy_spans.py), as a copied call value is;
- a payment method without references: words up to the end of the sentence.

The templates are compiled once into a character NFA (Thompson's construction); a state is the set
of NFA nodes, so it is the same for every conversation at the same point of a template and its token
mask (a walk of the token trie, as `ToolCallGrammar` walks its call automaton) is computed once per
tokenizer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from rl.chat.copy_spans import SaidSpans, said_spans
from rl.chat.token_masks import ids_mask
from rl.chat.views import REF_PATTERN

if TYPE_CHECKING:
    from rl.chat.call_grammar import _Trie

TRIGGER = "To confirm, I will"
END = ". Do you confirm (yes/no)?"
REASONS = ("no longer needed", "ordered by mistake")
REASON_LEAD = "with the reason '"  # what precedes the reason in a proposed cancellation (the teacher's words too)
ADDRESS_SEPARATORS = ",.;:!?\n"

CharTest = Callable[[str], bool]


# ---------------------------------------------------------------- the template language
@dataclass(frozen=True)
class _Lit:
    text: str


@dataclass(frozen=True)
class _Class:
    """One character that passes `test` (`name` only tells classes apart in a dump)."""
    name: str
    test: CharTest


@dataclass(frozen=True)
class _Seq:
    parts: tuple[object, ...]


@dataclass(frozen=True)
class _Alt:
    options: tuple[object, ...]


@dataclass(frozen=True)
class _Star:
    body: object


@dataclass(frozen=True)
class _Address:
    """A new address; its characters are marked, so a row can hold each piece to the customer's words."""
    body: object


def _whole_refs(text: str) -> bool:
    """Whether `text` has no piece of a reference token's markup unless it is one whole."""
    return REF_PATTERN.fullmatch(text) is not None or ("<" not in text and ">" not in text)


@dataclass(frozen=True)
class _Separator:
    """What joins another item to a list ("', the '", "' and the '"); its nodes are marked, so a row
    can tell a token that commits to another item (`ProposalTemplate.more_items`)."""
    body: object


def seq(*parts: object) -> _Seq:
    return _Seq(tuple(_Lit(p) if isinstance(p, str) else p for p in parts))


def alt(*options: object) -> _Alt:
    return _Alt(tuple(_Lit(o) if isinstance(o, str) else o for o in options))


def plus(body: object) -> _Seq:
    return seq(body, _Star(body))


_DIGIT = _Class("digit", str.isdigit)
_CAP = _Class("capital", str.isupper)
_NAME = _Class("name", lambda c: c.isalpha() or c == "-")
_OPTION = _Class("option", lambda c: c not in "()\n")
_PIECE_START = _Class("piece start", lambda c: c not in ADDRESS_SEPARATORS and not c.isspace())
_PIECE = _Class("piece", lambda c: c not in ADDRESS_SEPARATORS)
_PAY = _Class("payment", lambda c: c not in ".?\n")


def ref(kind: str) -> _Seq:
    """A reference token's text, `<order_3>` (the tokenizer holds shown ones whole)."""
    return seq(f"<{kind}_", plus(_DIGIT), ">")


@dataclass(frozen=True)
class _Order:
    """An order's reference where the action needs the order in `status` ("pending" to cancel or
    change it, "delivered" to return or exchange its items): a row that knows its orders'
    statuses names only such an order there (`ProposalTemplate.order_status`)."""
    status: str


NAME_WORDS = 3  # the longest product name: "Indoor Security Camera"


def _items(options: bool, refs: bool) -> _Seq:
    """'the Water Bottle' (up to `NAME_WORDS` capitalised words; `copy_product_names` holds them to
    the order's products), with `options` 'the Water Bottle (color: blue)', with `refs` also 'the
    <num_3>' (an item by reference), joined as `join_and` joins them: 'a, b and c'."""
    word = seq(_CAP, _Star(_NAME))
    name = seq(word, *[alt(seq(), seq(" ", word)) for _ in range(NAME_WORDS - 1)])
    one = alt(name, ref("num")) if refs else name
    if options:
        one = seq(one, alt(seq(), seq(" (", plus(_OPTION), ")")))
    return seq("the ", one, _Star(seq(_Separator(_Lit(", the ")), one)),
               alt(seq(), seq(_Separator(_Lit(" and the ")), one)))


def _address() -> _Address:
    piece = seq(_PIECE_START, _Star(_PIECE))
    return _Address(seq(piece, _Star(seq(", ", piece))))


def _payment(refs: bool) -> object:
    return seq("your ", ref("payment")) if refs else seq(_Class("payment start", lambda c: c not in ".?\n "),
                                                         _Star(_PAY))


def templates(payment_refs: bool, item_refs: bool = False, item_options: bool = False) -> _Alt:
    """Every proposal `rl/policies/wording.py` `describe` words, after the trigger (" cancel order
    <order_1> with the reason 'no longer needed'; ... . Do you confirm (yes/no)?"): payment
    methods by reference with `payment_refs`, the items an action takes away by reference too with
    `item_refs` and with their options with `item_options` (a view that shows them), the new
    variants of a swap always with theirs."""
    pending, delivered = _Order("pending"), _Order("delivered")
    pay = _payment(payment_refs)
    old, new = _items(options=item_options, refs=item_refs), _items(options=True, refs=False)
    return alt(  # in the order of ACTIONS
        seq(" cancel order ", pending, " " + REASON_LEAD, alt(*REASONS),
            "'; the refund goes to the original payment", END),
        seq(" change the shipping address of order ", pending, " to ", _address(), END),
        seq(" change the payment method of order ", pending, " to ", pay, END),
        seq(" update your default address to ", _address(), END),
        seq(" return ", old, " from order ", delivered, ", with the refund going to ", pay, END),
        seq(" modify order ", pending, ": swap ", old, " for ", new, ", settling any price difference with ", pay,
            END),
        seq(" exchange ", old, " from order ", delivered, " for ", new, ", settling any price difference with ",
            pay, END),
    )


# each template's action and the order status it needs (None: no order)
ACTIONS: tuple[tuple[str, str | None], ...] = (
    ("cancel", "pending"), ("address", "pending"), ("payment", "pending"), ("user_address", None),
    ("return", "delivered"), ("modify", "pending"), ("exchange", "delivered"))


# ---------------------------------------------------------------- the NFA
class _Nfa:
    """Thompson NFA of a template: nodes with character edges and empty edges; node 0 starts, `final` accepts."""

    def __init__(self, pattern: object) -> None:
        self.edges: list[list[tuple[CharTest, int]]] = []
        self.empty: list[list[int]] = []
        self.address: set[int] = set()  # nodes whose outgoing character is part of a new address
        self.separator: set[int] = set()  # nodes inside what joins another item to a list
        self.order_slot: dict[int, str] = {}  # node before an order's reference -> the status it needs
        start = self._node()
        self.branches: list[int] = []  # the first node of each top-level alternative (a template)
        if isinstance(pattern, _Alt):
            self.final = self._node()
            for option in pattern.options:
                a = self._node()
                self.empty[start].append(a)
                self.branches.append(a)
                self.empty[self._build(option, a, in_address=False)].append(self.final)
        else:
            self.final = self._build(pattern, start, in_address=False)
        self.before_address = self._reaching(self.address)

    def _reaching(self, targets: set[int]) -> frozenset[int]:
        """The nodes from which some node of `targets` can be reached (those included)."""
        back: dict[int, list[int]] = {}
        for src in range(len(self.edges)):
            for dst in [d for _, d in self.edges[src]] + self.empty[src]:
                back.setdefault(dst, []).append(src)
        out, stack = set(targets), list(targets)
        while stack:
            for n in back.get(stack.pop(), ()):
                if n not in out:
                    out.add(n)
                    stack.append(n)
        return frozenset(out)

    def _node(self) -> int:
        self.edges.append([])
        self.empty.append([])
        return len(self.edges) - 1

    def _char(self, src: int, test: CharTest, in_address: bool) -> int:
        dst = self._node()
        self.edges[src].append((test, dst))
        if in_address:
            self.address.add(src)
        return dst

    def _build(self, p: object, src: int, in_address: bool) -> int:
        """Add `p` from node `src`; return the node it ends at."""
        if isinstance(p, _Lit):
            for ch in p.text:
                src = self._char(src, functools.partial(str.__eq__, ch), in_address)
            return src
        if isinstance(p, _Class):
            return self._char(src, p.test, in_address)
        if isinstance(p, _Seq):
            for part in p.parts:
                src = self._build(part, src, in_address)
            return src
        if isinstance(p, _Alt):
            end = self._node()
            for option in p.options:
                a = self._node()
                self.empty[src].append(a)
                self.empty[self._build(option, a, in_address)].append(end)
            return end
        if isinstance(p, _Star):
            loop, end = self._node(), self._node()
            self.empty[src].append(loop)
            self.empty[loop].append(end)
            self.empty[self._build(p.body, loop, in_address)].append(loop)
            return end
        if isinstance(p, _Address):
            return self._build(p.body, src, True)
        if isinstance(p, _Order):
            self.order_slot[src] = p.status
            return self._build(ref("order"), src, in_address)
        if isinstance(p, _Separator):
            first = len(self.edges)
            end = self._build(p.body, src, in_address)
            self.separator.update(range(first, len(self.edges)))
            return end
        raise TypeError(f"not a template part: {p!r}")

    def closure(self, nodes: set[int]) -> frozenset[int]:
        out, stack = set(nodes), list(nodes)
        while stack:
            for n in self.empty[stack.pop()]:
                if n not in out:
                    out.add(n)
                    stack.append(n)
        return frozenset(out)

    def step(self, state: frozenset[int], ch: str) -> frozenset[int]:
        return self.closure({dst for n in state for test, dst in self.edges[n] if test(ch)})


State = frozenset[int]


class ProposalTemplate:
    """The proposal templates over one tokenizer's token texts (`texts`, None for special tokens;
    reference tokens have their text). `start()` is the state right after the trigger; `advance`
    follows a token; `done` says the proposal is complete (free text again); `mask` is the tokens
    that keep the proposal inside a template (cached per state); `address_mask` narrows it, at a
    state inside a new address, to tokens that keep the piece being written a span of what the
    customer said."""

    def __init__(self, texts: list[str | None], trie: _Trie, payment_refs: bool, item_refs: bool = False,
                 item_options: bool = False) -> None:
        self.texts = texts
        self.vocab_size = len(texts)
        self._trie = trie
        self.nfa = _Nfa(templates(payment_refs, item_refs, item_options))
        self._start = self.nfa.closure({0})
        self._starts: dict[frozenset[str], State] = {}
        self._masks: dict[State, torch.Tensor] = {}
        self._more: dict[State, torch.Tensor] = {}
        self._steps: dict[tuple[State, str], State] = {}
        self._address_masks: dict[tuple[State, str, tuple[str, ...]], torch.Tensor | None] = {}
        self._no_trigger: dict[tuple[bool, int], torch.Tensor | None] = {}

    def start(self, statuses: frozenset[str] | None = None) -> State:
        """The state right after the trigger; with `statuses` (those of the orders a conversation
        has looked up), only the templates whose action some such order allows (and those that
        name no order): a delivered order is never offered a cancellation."""
        if statuses is None:
            return self._start
        if statuses not in self._starts:
            branches = {b for b, (_, need) in zip(self.nfa.branches, ACTIONS, strict=True)
                        if need is None or need in statuses}
            self._starts[statuses] = self.nfa.closure(branches)
        return self._starts[statuses]

    def no_trigger(self, free: str) -> torch.Tensor | None:
        """The tokens a row that may not propose yet (`propose_after_lookup`) may write after its
        free text `free`: all but those that begin the trigger at the start of the turn (where every
        proposal of the teacher's begins, so the model turns to what it would do instead: a lookup)
        and those that complete it anywhere. None where no token is held back. Cached per
        (start of the turn, the trigger's prefix `free` ends with)."""
        start = not free.strip()
        done = next((k for k in range(len(TRIGGER) - 1, 0, -1) if free.endswith(TRIGGER[:k])), 0)
        key = (start, done)
        if key not in self._no_trigger:
            held = []
            for i, text in enumerate(self.texts):
                if not text:
                    continue
                lead = text.lstrip()
                if TRIGGER in TRIGGER[:done] + text or start and lead and (
                        TRIGGER.startswith(lead) or lead.startswith(TRIGGER)):
                    held.append(i)
            self._no_trigger[key] = ~ids_mask(held, self.vocab_size) if held else None
        return self._no_trigger[key]

    def order_status(self, state: State) -> str | None:
        """The status the order a proposal names next must have, at the slot of its reference."""
        needs = {self.nfa.order_slot[n] for n in state if n in self.nfa.order_slot}
        return needs.pop() if len(needs) == 1 else None

    def step(self, state: State, ch: str) -> State:
        key = (state, ch)
        nxt = self._steps.get(key)
        if nxt is None:
            nxt = self._steps[key] = self.nfa.step(state, ch)
        return nxt

    def consume(self, state: State, text: str) -> State:
        for ch in text:
            state = self.step(state, ch)
            if not state:
                break
        return state

    def done(self, state: State) -> bool:
        """Whether the proposal is complete: the template's last character was written."""
        return self.nfa.final in state

    def in_address(self, state: State) -> bool:
        return any(n in self.nfa.address for n in state)

    def reaches_address(self, state: State) -> bool:
        """Whether a new address is still ahead of `state` (or being written): elsewhere the
        customer's words hold nothing (`address_mask` is the template's mask)."""
        return not self.nfa.before_address.isdisjoint(state)

    def more_items(self, state: State) -> torch.Tensor:
        """The tokens of `mask(state)` that commit the proposal to another item of a list (", the"
        or " and the" past a name): a row that has named every item it may name is held from them.
        Cached per state."""
        m = self._more.get(state)
        if m is None:
            m = self._more[state] = ids_mask((i for i in self.mask(state).nonzero().flatten().tolist()
                                              if self._commits(state, self.texts[i] or "")), self.vocab_size)
        return m

    def _commits(self, state: State, text: str) -> bool:
        separator = self.nfa.separator
        for ch in text:
            state = self.step(state, ch)
            if state and all(n in separator for n in state):
                return True
        return False

    def follow(self, state: State, piece: str, text: str) -> tuple[State, str]:
        """The state after `text`, and the piece of a new address being written then (what
        follows the address's start or its last separator, without the space after a comma; ""
        outside an address). The state is empty when `text` left every template."""
        for ch in text:
            if self.in_address(state):
                if ch in ADDRESS_SEPARATORS:
                    piece = ""
                elif piece or ch != " ":
                    piece += ch
            else:
                piece = ""
            state = self.step(state, ch)
            if not state:
                break
        return state, piece

    def mask(self, state: State) -> torch.Tensor:
        """The tokens whose whole text keeps `state` alive (no special token: a proposal is never
        cut by an end of turn or a tool call)."""
        m = self._masks.get(state)
        if m is None:
            # a reference is written as its whole token, which free text may be held to (shown ones)
            m = self._masks[state] = ids_mask((i for i in self._alive_ids(state) if _whole_refs(self.texts[i] or "")),
                                              self.vocab_size)
        return m

    def _alive_ids(self, state: State) -> list[int]:
        out: list[int] = []
        stack: list[tuple[_Trie, State]] = [(self._trie, state)]
        while stack:
            node, s = stack.pop()
            for ch, child in node.children.items():
                nxt = self.step(s, ch)
                if not nxt:
                    continue
                out.extend(child.ids)
                if child.children:
                    stack.append((child, nxt))
        return out

    def address_mask(self, state: State, piece: str, said: tuple[str, ...]) -> torch.Tensor | None:
        """At `state` (in or before a new address, having written `piece` of its current piece): the
        allowed tokens (`mask`) whose address characters keep every piece a word-aligned span of
        the customer's messages `said`, closing a piece only where a span ends; a token that
        writes no address character passes. None when no token would (the customer has not said
        it: the template alone holds the text)."""
        key = (state, piece, said)
        if key not in self._address_masks:
            self._address_masks[key] = self._make_address_mask(state, piece, said)
        return self._address_masks[key]

    def _make_address_mask(self, state: State, piece: str, said: tuple[str, ...]) -> torch.Tensor | None:
        spans = said_spans(said)
        allowed = self.mask(state)
        keep = []
        for i in allowed.nonzero().flatten().tolist():
            if self._keeps_spans(state, piece, self.texts[i] or "", spans):
                keep.append(i)
        return ids_mask(keep, self.vocab_size) if keep else None

    def _keeps_spans(self, state: State, piece: str, text: str, spans: SaidSpans) -> bool:
        """Whether writing `text` from `state` keeps every address piece a span (`follow`'s pieces)."""
        inside = False
        for ch in text:
            if self.in_address(state):
                inside = True
                if ch in ADDRESS_SEPARATORS:  # the piece closes here
                    if piece and not spans.complete(piece):
                        return False
                    piece = ""
                elif piece or ch != " ":
                    piece += ch
                    if not spans.viable(piece):
                        return False
            elif inside:
                return True  # the address is behind: the template alone holds the rest
            state = self.step(state, ch)
        return True
