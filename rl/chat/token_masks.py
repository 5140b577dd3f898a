"""Boolean masks over a tokenizer's vocabulary, the form every decoding constraint hands to
generation (rl/chat/call_grammar.py, rl/chat/proposal_template.py)."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def ids_mask(ids: Iterable[int], size: int) -> torch.Tensor:
    """The mask of `size` tokens that allows exactly `ids`."""
    mask = torch.zeros(size, dtype=torch.bool)
    ids = list(ids)
    if ids:
        mask[ids] = True
    return mask
