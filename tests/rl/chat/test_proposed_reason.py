"""A cancellation call right after a proposal is held to the reason the proposal named, at the
value's start (a token may carry the quote and the first letters) and inside it."""

import torch

from rl.chat.call_states import END, ArgumentValue, EnumString, Literal
from rl.chat.proposal_template import REASONS, TRIGGER
from rl.chat.proposed_reason import proposed_reason, reason_mask

TEXTS = ['"', ' "', '"no', '"ordered', "no", " longer", " needed", "ordered", " by", " mistake", '"}', '"', None,
         '" ordered', '" no', " ordered", " no", " "]
ALL = torch.tensor([t is not None for t in TEXTS])


def _kept(mask):
    return {TEXTS[i] for i in mask.nonzero().flatten().tolist()} if mask is not None else None


def test_the_proposal_names_the_reason():
    asked = TRIGGER + " cancel order <order_1> with the reason 'ordered by mistake'; the refund goes to the " \
                      "original payment. Do you confirm (yes/no)?"
    assert proposed_reason(asked) == "ordered by mistake"
    assert proposed_reason("Could you tell me the reason for the cancellation?") is None


def test_at_the_value_only_the_proposed_reason_begins():
    at = ArgumentValue(tool="cancel_pending_order", used=frozenset({"order_id", "reason"}), key="reason")
    kept = _kept(reason_mask(at, ALL, TEXTS, "ordered by mistake"))
    # a quote alone, or with the reason's first word, spaced or not; never '"no'
    assert kept == {'"', ' "', '"ordered', '" ordered', " "}
    # with `spaced_values` the quote is followed by a space the grammar asks for, then the reason
    spaced = Literal(rest=" ", then=EnumString(options=REASONS, prefix="", after=END))
    assert _kept(reason_mask(spaced, ALL, TEXTS, "ordered by mistake")) == {" ordered", " ", "ordered"}
    inside = EnumString(options=REASONS, prefix="ordered", after=END)
    assert _kept(reason_mask(inside, ALL, TEXTS, "ordered by mistake")) == {" by", " "}
    done = EnumString(options=REASONS, prefix="ordered by mistake", after=END)
    closing = torch.tensor([t in ('"}', '"', " by") for t in TEXTS])  # what the grammar allows there
    assert _kept(reason_mask(done, closing, TEXTS, "ordered by mistake")) == {'"}', '"'}


def test_elsewhere_or_with_nothing_left_the_grammar_decides():
    order = ArgumentValue(tool="cancel_pending_order", used=frozenset({"order_id"}), key="order_id")
    assert reason_mask(order, ALL, TEXTS, "no longer needed") is None
    other = EnumString(options=("a", "b"), prefix="", after=END)
    assert reason_mask(other, ALL, TEXTS, "no longer needed") is None
    only_no = torch.tensor([t == '"no' for t in TEXTS])
    at = ArgumentValue(tool="cancel_pending_order", used=frozenset({"reason"}), key="reason")
    assert reason_mask(at, only_no, TEXTS, "ordered by mistake") is None
