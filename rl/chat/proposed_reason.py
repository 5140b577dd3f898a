"""A cancellation call in the turn after a proposal writes the reason that proposal named.

In `dev-refused` (session 47, bench/results/README.md) the models proposed the other reason after the
customer refused one, the customer said yes, and the call then wrote the refused reason: the reason
a call writes is the model's own reading of the customer, not the proposal the customer agreed to,
and a write that differs from what the customer said yes to fails the task (and the consent rule,
rl/env/consent.py). With the view's `reason_follows_proposal`, a call's `reason` value in the turn
after a proposal that named one is held to it (rl/chat/call_constraint.py), as
`writes_follow_proposal` holds its identifiers to the ones the proposal named.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl.chat.call_states import ArgumentValue, EnumString, Literal, State
from rl.chat.refused_reasons import proposed_cancellation
from rl.chat.token_masks import ids_mask

REASON_KEY = "reason"  # cancel_pending_order's reason parameter


def proposed_reason(proposal: str) -> str | None:
    """The cancellation reason `proposal` (the agent's message, with references) named, if any."""
    found = proposed_cancellation(proposal)
    return found[1] if found else None


def _keeps(value: str, reason: str) -> bool:
    """Whether `value` (a reason string's characters so far, its closing quote included once
    written) is still on `reason`. A leading space passes: with the view's `spaced_values` a value
    begins with one, which the grammar asks for where it belongs and forbids elsewhere."""
    value = value[1:] if value.startswith(" ") else value
    if '"' in value:
        return value.split('"', 1)[0] == reason
    return reason.startswith(value)


def reason_mask(state: State, allowed: torch.Tensor, texts: Sequence[str | None], reason: str) -> torch.Tensor | None:
    """Among the `allowed` tokens of a call at `state`, those that keep its reason value on
    `reason`; None where `state` is neither at the start of the reason's value nor inside it, or
    where no allowed token would be left (then the grammar alone decides)."""
    if isinstance(state, ArgumentValue) and state.key == REASON_KEY:
        def keeps(text: str) -> bool:  # whitespace before the value's quote keeps it open
            return _keeps(text.split('"', 1)[1], reason) if '"' in text else not text.strip()
    elif isinstance(state, Literal) and isinstance(state.then, EnumString) and reason in state.then.options:
        def keeps(text: str) -> bool:  # the value's leading space (`spaced_values`), then the reason
            return _keeps(text, reason)
    elif isinstance(state, EnumString) and reason in state.options:
        def keeps(text: str) -> bool:
            return _keeps(state.prefix + text, reason)
    else:
        return None
    ids = [i for i in allowed.nonzero().flatten().tolist() if keeps(texts[i] or "")]
    return ids_mask(ids, len(texts)) if ids else None
