"""A vocabulary mask allows exactly the ids it is given."""

import torch

from rl.chat.token_masks import ids_mask


def test_a_mask_allows_exactly_its_ids():
    assert ids_mask([1, 3], 5).tolist() == [False, True, False, True, False]
    assert ids_mask(iter([0, 0]), 2).tolist() == [True, False]
    empty = ids_mask([], 4)
    assert empty.dtype == torch.bool and not empty.any() and empty.shape == (4,)
