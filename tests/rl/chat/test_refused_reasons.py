"""A refused cancellation reason is read from the agent's proposal and the customer's answer, and a
proposal for that order is held to the other reason."""

import torch

from rl.chat.proposal_template import TRIGGER
from rl.chat.refused_reasons import REASON_LEAD, other_reason_mask, proposed_cancellation, refused_cancellation
from rl.policies import wording

ASKED = TRIGGER + " cancel order <order_2> with the reason 'no longer needed'; the refund goes to the original " \
                  "payment. Do you confirm (yes/no)?"


def test_the_lead_is_the_teachers():
    assert wording.REASON_LEAD == REASON_LEAD


def test_a_proposal_names_its_order_and_reason():
    assert proposed_cancellation(ASKED) == ("<order_2>", "no longer needed")
    assert proposed_cancellation("Sure. " + ASKED.replace("no longer needed", "ordered by mistake")) == (
        "<order_2>", "ordered by mistake")
    assert proposed_cancellation(ASKED.replace("cancel order", "return order")) is None
    assert proposed_cancellation("I will cancel order <order_2> with the reason 'no longer needed'.") is None


def test_only_an_answer_without_a_yes_refuses():
    assert refused_cancellation(ASKED, "That is not my reason, actually.") == ("<order_2>", "no longer needed")
    assert refused_cancellation(ASKED, "No, my reason is different. That order was a mistake.") is not None
    assert refused_cancellation(ASKED, "Yes, please go ahead.") is None
    assert refused_cancellation(ASKED, "I'm not sure.") is None  # might be a yes: nothing is held
    assert refused_cancellation("Could you tell me the reason?", "It was a mistake.") is None


def test_the_mask_keeps_only_tokens_toward_the_other_reason():
    texts = [" with", " the", " reason", " '", "no", " longer", "ordered", " by", " mistake", "'", " 'no",
             " needed", None]
    allowed = torch.ones(len(texts), dtype=torch.bool)
    allowed[-1] = False
    refused = frozenset({("<order_2>", "no longer needed")})
    at_slot = " cancel order <order_2> with the reason '"
    mask = other_reason_mask(at_slot, refused, allowed, texts)
    assert mask is not None and mask[texts.index("ordered")] and not mask[texts.index("no")]
    before = other_reason_mask(" cancel order <order_2> with the reason", refused, allowed, texts)
    assert before is not None and not before[texts.index(" 'no")] and before[texts.index(" '")]
    # another order, a reason both refused, or no cancellation: nothing held
    assert other_reason_mask(at_slot.replace("<order_2>", "<order_3>"), refused, allowed, texts) is None
    both = refused | {("<order_2>", "ordered by mistake")}
    assert other_reason_mask(at_slot, both, allowed, texts) is None
    assert other_reason_mask(" return order <order_2>", refused, allowed, texts) is None
