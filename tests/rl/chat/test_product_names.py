"""Free text names only products the conversation's lookups showed: the slot rules, the grammar's
mask over a real tokenizer, and a policy whose model prefers an unshown product."""

import asyncio
import json

import pytest
import torch

from rl.chat.call_grammar import CallConstraint, ToolCallGrammar
from rl.chat.format import render_conversation
from rl.chat.product_names import open_slot, slots_fit
from rl.chat.views import ChatView
from rl.models.generation import generate_continuing
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import encode, train_bpe
from rl.policies.local import LocalPolicy

SHOWN = ("Water Bottle", "T-Shirt", "Water Bottle Pro")
TOOLS = [{"type": "function", "function": {"name": "get_order_details", "parameters": {
    "type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}}}]


@pytest.mark.parametrize("text, fits", [
    ("I will return the Water Bottle from order 1", True),
    ("I will return the Water Bot", True),
    ("I will return the T-Shirt and the Water Bottle Pro (color: blue)", True),
    ("I will return the order", True),  # a lowercase word after the article is no product slot
    ("I will return the Dumbbell Set", False),
    ("I will return the Water Bottles", False),  # a name runs to a word's end
    ("the Water Bottle and the Dumbbell", False),  # every slot is checked, the last one too
    ("the Wat the ", False),  # a token that closes a slot half-written breaks it
    ("breathe Deeply", True),  # only the article as a word opens a slot
])
def test_every_slot_names_a_shown_product(text, fits):
    assert slots_fit(text, SHOWN) is fits


def test_strictly_a_whole_name_does_not_go_on_into_another_capitalised_word():
    # inside a proposal template (rl/chat/proposal_template.py) a name ends where a shown one does
    assert slots_fit("return the T-Shirt Street", SHOWN) and not slots_fit("return the T-Shirt Street", SHOWN, True)
    assert slots_fit("the Water Bottle Pro and the T-Shirt from", SHOWN, True)
    assert slots_fit("the T-Shirt (color: red)", SHOWN, True) and slots_fit("the T-Shirt ", SHOWN, True)
    assert open_slot("return the T-Shirt ", SHOWN) is None and open_slot("return the T-Shirt ", SHOWN, True)
    assert open_slot("return the T-Shirt f", SHOWN, True) is None


def test_open_slots_are_the_only_places_a_token_can_break_one():
    assert open_slot("I will return the", SHOWN) == "the"  # " Dumbbell" would open one
    assert open_slot("I will return the ", SHOWN) == "the "
    assert open_slot("I will return the Wat", SHOWN) == "the Wat"
    assert open_slot("I will return the Water Bottle", SHOWN) == "the Water Bottle"  # "Water Bottle Pro" goes on
    assert open_slot("I will return the T-Shirt", SHOWN) == "the T-Shirt"  # "T-Shirts" would break it
    assert open_slot("I will return the T-Shirt ", SHOWN) is None  # past its end: what follows is free
    assert open_slot("the Water Bottle and the T-", SHOWN) == "the T-"  # only the last slot is open
    assert open_slot("I will return the T-Shirt from", SHOWN) is None
    assert open_slot("Do you confirm", SHOWN) is None
    assert open_slot("bathe", SHOWN) is None


def test_the_open_slot_decides_like_the_whole_text():
    # what a token may do after the open slot alone is what it may do after the whole text
    tokens = [" Dumbbell", " Water", " Bottle", " Bottles", " Pro", "s", " (", " T", "-Shirt", " the", " order"]
    for text in ["Yes, I will return the", "I will return the Water", "the T-Shirt and the Water Bottle",
                 "return the ", "the T-"]:
        slot = open_slot(text, SHOWN)
        assert slot is not None
        for t in tokens:
            assert slots_fit(slot + t, SHOWN) == slots_fit(text + t, SHOWN), (text, t)


@pytest.fixture(scope="module")
def ptok():
    texts = [render_conversation([
        {"role": "user", "content": "I want to return something."},
        {"role": "tool", "content": json.dumps({"items": [{"item_id": "1", "name": name}]})},
        {"role": "assistant", "content": f"To confirm, I will return the {name} from the order. Do you confirm?"}])
        for name in ["Dumbbell Set", "Water Bottle", "T-Shirt", "Desk Lamp", "Tea Kettle"] * 20]
    return train_bpe(texts, vocab_size=500)


def test_the_grammars_mask_keeps_exactly_the_tokens_that_fit(ptok):
    g = ToolCallGrammar(TOOLS, ptok)
    for tail in ("the", "the ", "the Wat", "the T-"):
        mask = g.product_mask(tail, SHOWN)
        assert mask is not None
        for i, text in enumerate(g.texts):
            if text is not None:
                assert bool(mask[i]) == slots_fit(tail + text, SHOWN), (tail, text)
    # a special token (the end of a turn) only where no name has begun
    specials = [i for i, t in enumerate(g.texts) if t is None]
    assert all(g.product_mask("the ", SHOWN)[i] for i in specials)
    assert not any(g.product_mask("the Wat", SHOWN)[i] for i in specials)


def _model(tok, seed):
    torch.manual_seed(seed)
    return build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                 num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()


def test_constrained_free_text_names_a_shown_product_and_records_the_constraint(ptok):
    g = ToolCallGrammar(TOOLS, ptok)
    model = _model(ptok, 3)
    bias = torch.zeros(len(ptok))
    for t in encode(ptok, " Water Bottle"):
        bias[t] = 6.0
    for t in encode(ptok, " Dumbbell Set"):
        bias[t] = 8.0  # the model prefers the product it saw most
    with torch.no_grad():
        model.get_output_embeddings().bias = torch.nn.Parameter(bias)
    prompt = encode(ptok, render_conversation([{"role": "user", "content": "Return it."}],
                                              add_generation_prompt=True))
    rows = 6

    def sample(products):
        constraint = CallConstraint([g] * rows, products=[products] * rows)
        constraint.free = ["I will return the"] * rows
        gens, _ = generate_continuing(model, [prompt] * rows, [None] * rows, max_new_tokens=6,
                                      eos_id=ptok.eos_token_id, pad_id=ptok.pad_token_id, greedy=True,
                                      constraint=constraint, return_caches=False)
        return gens

    free = [ptok.decode(x.ids) for x in sample(None)]
    assert all(t.startswith(" Dumbbell") for t in free), free
    for gen in sample(("Water Bottle", "T-Shirt")):
        text = ptok.decode(gen.ids)
        assert text.startswith(" Water Bottle") and "Dumbbell" not in text, text
        # the name's tokens are recorded as chosen under the constraint (what GRPO trains on)
        assert len(gen.constrained) >= len(encode(ptok, " Water Bottle")), gen.constrained


def test_a_policy_names_only_the_product_its_lookup_showed(ptok):
    model = _model(ptok, 4)
    bias = torch.zeros(len(ptok))
    for text, b in ((" the", 6.0), (" Dumbbell", 6.0), (" Set", 5.0), (" Tea", 4.0), (" Kettle", 4.0)):
        for t in encode(ptok, text):
            bias[t] = b
    with torch.no_grad():
        model.get_output_embeddings().bias = torch.nn.Parameter(bias)
    msgs = [{"role": "system", "content": "agent"}, {"role": "user", "content": "I want to return something."},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "get_order_details", "arguments": json.dumps({"order_id": "#W1"})}}]},
            {"role": "tool", "tool_call_id": "c1",
             "content": json.dumps({"order_id": "#W1", "items": [{"item_id": "9", "name": "Tea Kettle"}]})}]

    def replies(copy):
        view = ChatView(constrain_calls=True, copy_product_names=copy)
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, ptok, max_new_tokens=40, view=view, adopt_history=True, seed=2)
        return [asyncio.run(policy.act(f"e{i}", msgs, TOOLS))["content"] for i in range(4)]

    assert any("the Dumbbell" in r for r in replies(False))
    named = replies(True)
    assert all(slots_fit(r, ("Tea Kettle",)) and "the Dumbbell" not in r for r in named), named
    assert any("the Tea Kettle" in r for r in named), named
