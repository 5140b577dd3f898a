"""Per-row constraint state for batched generation: rows outside a tool call are free; a row that
writes `<tool_call>` is held to its grammar (rl/chat/call_grammar.py) until it writes
`</tool_call>`, its identifier slots to the references its conversation has shown, its copied values
to spans of what the customer said; with `text_refs` its free text names only shown references (a
model that says "cancel order `<order_2>`" when only `<order_1>` was named names an order nobody
mentioned); with `text_shown` (per row) in place of the shown references where a row's free text may
name fewer (not an item's reference); with `copy_numbers`, free text that writes a number the
customer said goes on in the customer's words to the end of their phrase (`held_copy`,
rl/chat/copy_spans.py: a confirmation that names the house number names the customer's street, not
one the model makes up); with `products` (per row, the product names its conversation's lookups
showed), a capitalised word after "the " in free text is one of those names
(rl/chat/product_names.py: a return proposal names a product of the order, not the one the model saw
most in training); with `proposal`, free text that writes "To confirm, I will" goes on in one of the
teacher's proposal templates to its "(yes/no)?" (rl/chat/proposal_template.py), the other masks
narrowing its slots where they agree with it; a row that may not propose yet (`may_propose`: no
lookup has shown an order's or the customer's record) does not begin one; with `refused` (per row,
the (order reference, reason) cancellations its customer said no to), a cancellation of such an
order names the other reason (rl/chat/refused_reasons.py); with `reasons` (per row, the reason the
proposal just before the turn named), a call's reason is that one (rl/chat/proposed_reason.py); with
`status_answers`, the word after "is currently" in free text is the status of an order in the row's
`orders` (rl/chat/status_answer.py); with `refusals_by_status`, the word after "is already" is the
status of the order it names, never "pending", and the phrase is not written of an order with no
other status."""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

import torch

from rl.chat.call_states import CopiedString, State
from rl.chat.copy_spans import held_copy, said_spans
from rl.chat.product_names import open_slot
from rl.chat.proposal_template import TRIGGER, ProposalTemplate
from rl.chat.proposal_template import State as ProposalState
from rl.chat.proposed_reason import reason_mask
from rl.chat.refused_reasons import other_reason_mask
from rl.chat.status_answer import open_slot as status_slot
from rl.chat.status_answer import refusal_done, refusal_slot
from rl.chat.token_masks import ids_mask

if TYPE_CHECKING:
    from rl.chat.call_grammar import ToolCallGrammar


class CallConstraint:
    """With `shown` (per row, the references its conversation has shown, or None), a row's call is
    held to `grammar.for_shown(refs)` and its identifier slots to the references shown. With `said`
    (per row, the customer's messages as the model read them), a value of a copied parameter is held
    to a span of them (`ToolCallGrammar.copy_mask`). With `text_refs`, a row outside a call may
    write only the reference tokens its conversation has shown. With `copy_numbers` (and `said`), a
    row outside a call that has begun a number the customer said copies the rest of their phrase
    (`ToolCallGrammar.text_copy_mask`). With `products`, a row outside a call names only those
    products after "the " (`ToolCallGrammar.product_mask`). With `proposal`, a row outside a call
    that has written `TRIGGER` is held to the proposal templates until one is complete
    (`ProposalTemplate.mask`; inside a new address, to the customer's words where they fit:
    `address_mask`); a shown-references, copy or product mask that leaves a token the template
    allows narrows it further, one that leaves none is dropped (the template wins). With
    `said_items` too, the items of a proposal's list are products the customer named (when they
    named any of the shown ones), each once, and the list ends when none is left (`said_items`). A
    row whose `may_propose` is False does not begin a proposal (`ProposalTemplate.no_trigger`). A
    row's `refused` cancellations are not proposed again with the refused reason. A row's call
    writes its `reasons` entry as its reason, where it has one."""

    def __init__(self, grammars: list[ToolCallGrammar | None],
                 shown: list[frozenset[str] | None] | None = None,
                 said: list[tuple[str, ...]] | None = None, text_refs: bool = False,
                 copy_numbers: bool = False, products: list[tuple[str, ...] | None] | None = None,
                 proposal: ProposalTemplate | None = None, said_items: bool = False,
                 orders: list[dict[str, str] | None] | None = None,
                 may_propose: list[bool] | None = None,
                 refused: list[frozenset[tuple[str, str]]] | None = None,
                 reasons: list[str | None] | None = None,
                 text_shown: list[frozenset[str] | None] | None = None, status_answers: bool = False,
                 refusals_by_status: bool = False) -> None:
        self.shown = list(shown) if shown is not None else [None] * len(grammars)
        self.said = list(said) if said is not None else [()] * len(grammars)
        if len(self.shown) != len(grammars) or len(self.said) != len(grammars):
            raise ValueError("one set of shown references and one of customer messages per row")
        self.grammars = [g.for_shown(r) if g is not None else None for g, r in zip(grammars, self.shown, strict=True)]
        self.states: list[State | None] = [None] * len(grammars)
        self.written = [""] * len(grammars)  # the text of each row's open call so far
        self.copy_numbers = copy_numbers
        self.products = list(products) if products is not None else [None] * len(grammars)
        if len(self.products) != len(grammars):
            raise ValueError("one list of shown product names per row")
        # the free text of each row so far (with `copy_numbers`, `products` or `proposal`)
        self.free = [""] * len(grammars)
        self.proposal = proposal
        self.proposing: list[ProposalState | None] = [None] * len(grammars)  # a row's template state while in one
        self.piece = [""] * len(grammars)  # the address piece a proposing row is writing
        self.said_items = said_items
        self.proposal_at = [0] * len(grammars)  # where in its free text a proposing row's template began
        # per row, the status of each order reference its lookups showed (with `proposal`), or None
        self.orders = list(orders) if orders is not None else [None] * len(grammars)
        if len(self.orders) != len(grammars):
            raise ValueError("one map of order statuses per row")
        # per row, whether it may begin a proposal (with `proposal`; False: no lookup has shown an
        # order's or the customer's record yet)
        self.may_propose = list(may_propose) if may_propose is not None else [True] * len(grammars)
        if len(self.may_propose) != len(grammars):
            raise ValueError("one may-propose flag per row")
        # per row, the (order reference, reason) cancellations its customer refused (with `proposal`)
        self.refused = list(refused) if refused is not None else [frozenset()] * len(grammars)
        if len(self.refused) != len(grammars):
            raise ValueError("one set of refused cancellations per row")
        # per row, the reason its call must write (the one the proposal before the turn named), or None
        self.reasons = list(reasons) if reasons is not None else [None] * len(grammars)
        if len(self.reasons) != len(grammars):
            raise ValueError("one proposed reason (or None) per row")
        # per row, the references its free text may write where they are fewer than those shown (an
        # item's reference, which the teacher's text never writes), or None: the shown ones
        text_shown = list(text_shown) if text_shown is not None else [None] * len(grammars)
        if len(text_shown) != len(grammars):
            raise ValueError("one set of free-text references (or None) per row")
        # per row, the reference tokens its free text may not write (those not shown), or None
        self.unshown: list[torch.Tensor | None] = [
            g.unshown_ids(t if t is not None else r) if text_refs and g is not None and r is not None else None
            for g, r, t in zip(self.grammars, self.shown, text_shown, strict=True)]
        # the word after "is currently" in a row's free text is the status of an order in `orders`
        self.status_answers = status_answers
        # the word after "is already" (a refusal) is the named order's status in `orders`, never "pending"
        self.refusals_by_status = refusals_by_status
        self.masked: list[int] = []  # the rows whose logits the last `mask_logits` changed
        self._shown_only_masks: dict[int, torch.Tensor] = {}
        self._status_masks: dict[tuple[int, str], torch.Tensor | None] = {}

    def mask_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """`logits` with the tokens a constrained row may not write set to -inf (a copy, or the
        same tensor when no row is inside a call and no free-text row has references to hide).
        `masked` then lists the rows it changed (their tokens are recorded as constrained)."""
        rows = [i for i, s in enumerate(self.states) if s is not None]
        copies = {i: m for i, s in enumerate(self.states)
                  if s is None and self.copy_numbers and (m := self._text_copy(i)) is not None}
        named = {i: m for i, s in enumerate(self.states)
                 if s is None and self.products[i] is not None and (m := self._product(i)) is not None}
        proposing = {i for i, s in enumerate(self.states) if s is None and self.proposing[i] is not None}
        held = {i: m for i, s in enumerate(self.states)
                if s is None and i not in proposing and (m := self._held_back(i)) is not None}
        stated = {i: m for i, s in enumerate(self.states)
                  if s is None and i not in proposing and (m := self._status(i)) is not None}
        free = [i for i, s in enumerate(self.states) if s is None and (
            self.unshown[i] is not None or i in copies or i in named or i in proposing or i in held or i in stated)]
        self.masked = []
        if not rows and not free:
            return logits
        out = logits.clone()
        for i in free:
            if i in proposing:
                _keep_only(out, i, self._proposal_mask(i, copies.get(i), named.get(i)))
                self.masked.append(i)
                continue
            ids = self.unshown[i]
            if ids is not None:
                out[i, ids.to(out.device)] = float("-inf")
            if i in copies:
                _keep_only(out, i, copies[i])
            if i in named and i not in copies:
                _keep_only(out, i, named[i])
            if i in held and bool(torch.isfinite(out[i, : held[i].shape[0]][held[i].to(out.device)]).any()):
                _keep_only(out, i, held[i])  # a copy or a name that leaves nothing else wins
            if i in stated:
                _keep_only(out, i, stated[i])
            self.masked.append(i)
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
                value = self.written[i][len(self.written[i]) - s.length:] if isinstance(s, CopiedString) else ""
                copied = g.copy_mask(s, value, self.said[i])
                if copied is not None and bool((allowed & copied).any()):
                    allowed = allowed & copied
            reason = self.reasons[i]
            if reason is not None and (kept := reason_mask(s, allowed, g.texts, reason)) is not None:
                allowed = kept
            if bool(allowed.any()):
                _keep_only(out, i, allowed)
                self.masked.append(i)
        return out

    def _proposal_mask(self, row: int, copy: torch.Tensor | None, named: torch.Tensor | None) -> torch.Tensor:
        """What a row inside a proposal template may write: the template's tokens, narrowed by
        the customer's words in an address, the shown references, a copy in progress and a
        product slot, each where it leaves a token."""
        assert self.proposal is not None
        state = self.proposing[row]
        assert state is not None
        allowed = self.proposal.mask(state)
        # a token may enter a new address from before it (" to" then " 4149")
        if self.said[row] and self.proposal.reaches_address(state):
            spans = self.proposal.address_mask(state, self.piece[row], self.said[row])
            if spans is not None:
                allowed = spans
        narrower = [m for m in (self._shown_only(row), copy, named) if m is not None]
        status = self.proposal.order_status(state)
        if status is not None and (fits := self._with_status(row, status)) is not None:
            narrower.append(fits)
        if self.said_items and self.products[row]:
            customer_named = said_items(self.products[row] or (), self.said[row])
            if customer_named and not _unlisted(customer_named, self._item_list(row)):
                narrower.append(~self.proposal.more_items(state))  # every item they named is listed
        for m in narrower:
            both = allowed & m
            if bool(both.any()):
                allowed = both
        if self.refused[row]:
            other = other_reason_mask(self.free[row][self.proposal_at[row]:], self.refused[row], allowed,
                                      self.proposal.texts)
            if other is not None and bool(other.any()):
                allowed = other  # a subset of `allowed`
        return allowed

    def _shown_only(self, row: int) -> torch.Tensor | None:
        """The tokens a proposing row may write as far as references go: all but the unshown ones
        (None: every reference is shown). Made once per row, as a row's shown set is fixed."""
        unshown = self.unshown[row]
        if unshown is None:
            return None
        if row not in self._shown_only_masks:
            assert self.proposal is not None
            self._shown_only_masks[row] = ~ids_mask(unshown.tolist(), self.proposal.vocab_size)
        return self._shown_only_masks[row]

    def _with_status(self, row: int, status: str) -> torch.Tensor | None:
        """All tokens but the order references a row may not name where an order in `status` is
        due: those of orders not looked up, or looked up in another status (None: the row has
        looked up no order, or does not track its orders). Made once per (row, status)."""
        key = (row, status)
        if key not in self._status_masks:
            known, g = self.orders[row], self.grammars[row]
            other = [i for r, i in g.ref_ids.items() if r.startswith("<order_") and known.get(r) != status] \
                if known and g is not None else []
            assert self.proposal is not None
            self._status_masks[key] = ~ids_mask(other, self.proposal.vocab_size) if other else None
        return self._status_masks[key]

    def _held_back(self, row: int) -> torch.Tensor | None:
        """The mask of a free-text row that may not propose yet (`ProposalTemplate.no_trigger`), else
        None."""
        if self.proposal is None or self.may_propose[row] or self.grammars[row] is None:
            return None  # a row without a grammar follows no free text: it is never held
        return self.proposal.no_trigger(self.free[row])

    def _text_copy(self, row: int) -> torch.Tensor | None:
        """The mask of a free-text row in the middle of copying the customer's words, else None."""
        g, said = self.grammars[row], self.said[row]
        if g is None or not said:
            return None
        value = held_copy(self.free[row], said_spans(said))
        return g.text_copy_mask(value, said) if value is not None else None

    def _status(self, row: int) -> torch.Tensor | None:
        """The mask of a free-text row at or inside a status slot (with `status_answers`) or a
        refusal's (with `refusals_by_status`), or about to write a refusal the order's status does not
        allow, else None."""
        g, orders = self.grammars[row], self.orders[row]
        if g is None or orders is None:
            return None
        if self.status_answers and orders:
            statuses = frozenset(orders.values())
            value = status_slot(self.free[row], statuses)
            if value is not None:
                return g.status_mask(value, statuses)
        if self.refusals_by_status:
            slot = refusal_slot(self.free[row], orders)
            if slot is not None:
                return g.status_mask(*slot)
            done = refusal_done(self.free[row], orders)
            return g.refusal_hold_mask(done) if done is not None else None
        return None

    def _product(self, row: int) -> torch.Tensor | None:
        """The mask of a free-text row at or inside a product slot, else None."""
        g, names = self.grammars[row], self.products[row]
        if g is None or names is None:
            return None
        # inside a proposal a name ends where a shown one does: "the Desk Lamp", not "the Desk Lamp Street"
        strict = self.proposing[row] is not None
        slot = open_slot(self.free[row], names, strict)
        if slot is None:
            return None
        if strict and self.said_items:
            named = said_items(names, self.said[row])
            if named:
                names = _unlisted(named, self._item_list(row)[: -len(slot)])
        return g.product_mask(slot, names, strict=strict)

    def _item_list(self, row: int) -> str:
        """The text of the item list a proposing row is writing, from its first article."""
        text = self.free[row][self.proposal_at[row]:]
        return text[max(text.rfind(m) for m in LIST_STARTS) + 1:]

    def update(self, row: int, token_id: int) -> None:
        g = self.grammars[row]
        if g is None:
            return
        s = self.states[row]
        if s is None:
            if token_id == g.open_id:
                self.states[row], self.written[row] = g.start(), ""
            elif (self.copy_numbers or self.products[row] is not None or self.proposal is not None
                  or self.status_answers or self.refusals_by_status) and 0 <= token_id < g.vocab_size:
                text = g.texts[token_id] or ""
                self.free[row] += text
                if self.proposal is not None:
                    self._follow_proposal(row, text)
        elif token_id == g.close_id:
            self.states[row] = None
        else:
            self.states[row] = g.advance(s, token_id)
            if 0 <= token_id < g.vocab_size:
                self.written[row] += g.texts[token_id] or ""


    def _follow_proposal(self, row: int, text: str) -> None:
        """Advance a row's proposal template by `text`, or start one when `text` completed the
        trigger (the rest of the token is the template's first characters)."""
        assert self.proposal is not None
        state = self.proposing[row]
        if state is None:
            free = self.free[row]
            at = free.find(TRIGGER, max(0, len(free) - len(text) - len(TRIGGER) + 1))
            if at < 0:
                return
            known = self.orders[row]
            # nothing looked up yet: every template (holding it to the default address's update,
            # which names no order, wrote nonsense addresses in `dev-lookups`' first start)
            state = self.proposal.start(frozenset(known.values()) if known else None)
            text, self.piece[row] = free[at + len(TRIGGER):], ""
            self.proposal_at[row] = at + len(TRIGGER)
        state, self.piece[row] = self.proposal.follow(state, self.piece[row], text)
        # complete, or left every template (a token no mask held it to): free text again
        self.proposing[row] = None if not state or self.proposal.done(state) else state


LIST_STARTS = (" return the ", " swap the ", " exchange the ", " for the ")  # where a proposal's item list begins


@functools.lru_cache(maxsize=4096)
def said_items(names: tuple[str, ...], said: tuple[str, ...]) -> tuple[str, ...]:
    """The shown product `names` the customer's messages `said` name (any case, whole words)."""
    text = " ".join(said).lower()
    return tuple(n for n in names if re.search(r"(?<![\w-])" + re.escape(n.lower()) + r"(?![\w-])", text))


def _unlisted(names: tuple[str, ...], listed: str) -> tuple[str, ...]:
    """`names` not yet named whole in the item list text `listed`."""
    return tuple(n for n in names if not re.search(r"the " + re.escape(n) + r"(?![\w-])", listed))


def _keep_only(logits: torch.Tensor, row: int, allowed: torch.Tensor) -> None:
    """Set every token of `row` that `allowed` (over the tokenizer's ids) does not allow to -inf,
    and the padding ids past the tokenizer's, in place."""
    allowed = allowed.to(logits.device)
    logits[row, : allowed.shape[0]].masked_fill_(~allowed, float("-inf"))
    logits[row, allowed.shape[0]:] = float("-inf")
