"""A status answer from what the lookup showed. With `no_item_refs_in_text`, a local policy's free text
names no reference a lookup showed as an item id: a model that answers a tracking question with an
item's reference (what the cold start of task seed 41 did, `dev-41` in bench/results/README.md)
writes the tracking number's instead. With `status_answers`, the word after "is currently" is the
status the lookup showed, not the one the model saw most in training. With `refusals_by_status`, a
refusal's "is already" names the order's status, and is not said of a pending order."""

import asyncio
import json

import torch

from rl.chat.call_constraint import CallConstraint
from rl.chat.call_grammar import ToolCallGrammar
from rl.chat.format import render_conversation
from rl.chat.views import REF_TOKENS, ChatView
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import encode, train_bpe
from rl.policies.local import LocalPolicy

TOOLS = [{"type": "function", "function": {"name": "get_order_details", "parameters": {
    "type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}}}]
VIEW = ChatView(refs=True, constrain_calls=True, shown_refs_in_text=True, compact_schemas=True,
                compact_results=True)
ITEM, TRACKING = "1111111111", "222222222222"
ANSWER = "Order <order_1> is currently delivered; its tracking number is <num_1>."  # <num_1>: the item
REFUSAL = "I understand, but I'm afraid I can't: order <order_1> is already delivered, and only pending orders " \
          "can be cancelled."
MESSAGES = [
    {"role": "system", "content": "agent"},
    {"role": "user", "content": "What is the status of order #W1234567, and its tracking number?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "get_order_details", "arguments": json.dumps({"order_id": "#W1234567"})}}]},
    {"role": "tool", "tool_call_id": "c1", "content": json.dumps({
        "order_id": "#W1234567", "status": "delivered",
        "items": [{"item_id": ITEM, "name": "Water Bottle", "options": {}}],
        "fulfillments": [{"tracking_id": [TRACKING], "item_ids": [ITEM]}], "payment_history": []})},
]


def _tok():
    texts = [render_conversation([{"role": "user", "content": f"status of <order_{i % 3 + 1}> please"},
                                  {"role": "assistant", "content": ANSWER.replace("<num_1>", f"<num_{i % 3 + 1}>")
                                   .replace("delivered", ("delivered", "cancelled", "processed")[i % 3])},
                                  {"role": "assistant", "content": REFUSAL.replace("delivered", ("delivered",
                                                                                    "processed", "pending")[i % 3])}])
             for i in range(30)]
    return train_bpe(texts, vocab_size=400, extra_tokens=VIEW.extra_tokens)


def _steer(model, tok, answer: str = ANSWER) -> None:
    """Make the model answer `ANSWER` (an item's reference as the tracking number): a hook adds a large
    logit to the answer's token at each position of the reply, and a smaller one to every number
    reference where the answer writes one (a real model's forward: it would write some number there)."""
    reply = encode(tok, answer) + [tok.eos_token_id]
    nums = [tok.convert_tokens_to_ids(t) for t in REF_TOKENS if t.startswith("<num_")]
    start = {}

    def hook(module, args, kwargs, out):
        pos = kwargs["position_ids"]
        if pos.shape[1] > 1:  # the prompt: the reply starts after it
            start["at"] = int(pos[0, -1]) + 1
        tid = reply[min(int(pos[0, -1]) + 1 - start["at"], len(reply) - 1)]
        out.logits[:, -1, tid] += 12.0
        if tid in nums:
            out.logits[:, -1, nums] += 8.0
        return out

    model.register_forward_hook(hook, with_kwargs=True)


def test_free_text_writes_the_tracking_reference_not_an_items():
    tok = _tok()
    torch.manual_seed(3)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    _steer(model, tok)

    def reply(view):
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, tok, max_new_tokens=40, view=view, greedy=True, seed=1, adopt_history=True)
        return asyncio.run(policy.act("e", MESSAGES, TOOLS))["content"]

    free = reply(VIEW)
    assert ITEM in free and TRACKING not in free, free
    held = reply(ChatView(**{**VIEW.__dict__, "no_item_refs_in_text": True}))
    assert TRACKING in held and ITEM not in held, held
    assert held.startswith("Order #W1234567 is currently delivered")


def test_the_status_answer_is_the_one_the_lookup_showed():
    tok = _tok()
    torch.manual_seed(3)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    _steer(model, tok)  # toward "... is currently delivered; ..."
    record = MESSAGES[3]["content"].replace('"delivered"', '"cancelled"')
    cancelled = [*MESSAGES[:3], {**MESSAGES[3], "content": record}]
    view = ChatView(**{**VIEW.__dict__, "proposal_template": True, "proposals_by_status": True})

    def reply(view):
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, tok, max_new_tokens=40, view=view, greedy=True, seed=1, adopt_history=True)
        return asyncio.run(policy.act("e", cancelled, TOOLS))["content"]

    assert reply(view).startswith("Order #W1234567 is currently delivered")
    assert reply(ChatView(**{**view.__dict__, "status_answers": True})).startswith(
        "Order #W1234567 is currently cancelled")


def test_a_refusal_names_the_orders_status_and_is_not_said_of_a_pending_order():
    tok = _tok()
    torch.manual_seed(3)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    _steer(model, tok, REFUSAL)  # "... order <order_1> is already delivered, ..."
    view = ChatView(**{**VIEW.__dict__, "proposal_template": True, "proposals_by_status": True})

    def reply(view, status):
        assert ChatView.from_manifest(view.describe()) == view
        record = MESSAGES[3]["content"].replace('"delivered"', f'"{status}"')
        policy = LocalPolicy(model, tok, max_new_tokens=60, view=view, greedy=True, seed=1, adopt_history=True)
        return asyncio.run(policy.act("e", [*MESSAGES[:3], {**MESSAGES[3], "content": record}], TOOLS))["content"]

    held = ChatView(**{**view.__dict__, "refusals_by_status": True})
    assert "order #W1234567 is already delivered" in reply(view, "pending")  # the lookup said pending
    assert "is already" not in reply(held, "pending")
    assert "order #W1234567 is already processed" in reply(held, "processed")


def test_the_mask_rules_out_the_references_free_text_may_not_write():
    tok = _tok()
    grammar = ToolCallGrammar(TOOLS, tok, text_tokens=REF_TOKENS)
    shown = frozenset({"<order_1>", "<num_1>", "<num_2>"})
    ids = {r: tok.convert_tokens_to_ids(r) for r in shown}
    narrowed = CallConstraint([grammar], [shown], text_refs=True, text_shown=[shown - {"<num_1>"}])
    masked = narrowed.mask_logits(torch.zeros(1, len(tok)))
    assert masked[0, ids["<num_1>"]] == float("-inf")
    assert masked[0, ids["<num_2>"]] == 0 and masked[0, ids["<order_1>"]] == 0
    # None keeps the shown references (the default), and so does a constraint without `text_shown`
    for constraint in (CallConstraint([grammar], [shown], text_refs=True, text_shown=[None]),
                       CallConstraint([grammar], [shown], text_refs=True)):
        assert constraint.mask_logits(torch.zeros(1, len(tok)))[0, ids["<num_1>"]] == 0
