"""A cancellation reason the customer refused is not proposed again for the same order.

The store takes two cancellation reasons, so a customer who answers "To confirm, I will cancel order
<order_1> with the reason 'no longer needed' ..." with anything but a yes has said the other one
(or wants something else, which no cancellation of that order with that reason gives them either).
In `c12` every model answered 95% of such refusals by proposing the refused reason again, and none
of the 19-24 episodes per model that held a refusal passed (bench/results/README.md, `c12`): the
model reads the customer's reason once, and a model that misread it misreads it again. With the
view's `refused_not_again` a proposal template's reason slot, for an order whose cancellation with
a reason was refused, offers only the other reason (rl/chat/call_constraint.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from rl.chat.proposal_template import REASON_LEAD, REASONS, TRIGGER
from rl.chat.replies import AFFIRMATIVE
from rl.chat.token_masks import ids_mask

_CANCELLATION = re.compile(r" cancel order (<order_\d+>) " + re.escape(REASON_LEAD) + "(" + "|".join(REASONS) + ")'")
_ORDER = re.compile(r" cancel order (<order_\d+>)")


def proposed_cancellation(text: str) -> tuple[str, str] | None:
    """The (order reference, reason) a proposal in the teacher's template proposes to cancel with,
    if `text` (as the model wrote it, with references) holds one."""
    at = text.find(TRIGGER)
    found = _CANCELLATION.match(text, at + len(TRIGGER)) if at >= 0 else None
    return (found.group(1), found.group(2)) if found else None


def refused_cancellation(proposal: str, reply: str) -> tuple[str, str] | None:
    """The (order reference, reason) `proposal` (the agent's message, with references) proposed to
    cancel with, when the customer's `reply` to it holds no yes; None otherwise."""
    proposed = proposed_cancellation(proposal)
    return proposed if proposed is not None and not AFFIRMATIVE.search(reply) else None


def _keeps_reason(text: str, reasons: Sequence[str]) -> bool:
    """Whether the proposal text `text` has not (yet) named a reason outside `reasons`."""
    at = text.find(REASON_LEAD)
    if at < 0:
        return True
    tail = text[at + len(REASON_LEAD):]
    return any(r.startswith(tail) or tail.startswith(r) for r in reasons)


def other_reason_mask(proposal: str, refused: frozenset[tuple[str, str]], allowed: torch.Tensor,
                      texts: Sequence[str | None]) -> torch.Tensor | None:
    """Among the `allowed` tokens (a bool mask over `texts`, the tokenizer's token texts), those
    that keep the proposal written so far (`proposal`: what follows the trigger) from naming a
    reason `refused` for its order; None where nothing is held (no cancellation, no refused reason
    for its order, or every reason refused: then the template alone decides)."""
    found = _ORDER.match(proposal)
    if found is None:
        return None
    left = [r for r in REASONS if (found.group(1), r) not in refused]
    if len(left) == len(REASONS) or not left:
        return None
    ids = [i for i in allowed.nonzero().flatten().tolist() if _keeps_reason(proposal + (texts[i] or ""), left)]
    return ids_mask(ids, len(texts))
