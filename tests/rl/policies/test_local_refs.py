"""A local policy with a reference view: the model reads references where the customer and the tools
wrote identifiers, and what it writes is expanded back before the tool call is parsed.

Generation is replaced by a fixed text here (the model's sampling is tested elsewhere); what is
under test is the view plumbing around it: the trace, the tokenizer and the expansion."""

import asyncio
import json

from rl.chat.format import render_conversation
from rl.chat.views import ChatView
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import decode, encode, train_bpe
from rl.policies.local import LocalPolicy

VIEW = ChatView(compact_results=True, refs=True, names=frozenset({"Ann", "Lee"}))
WRITES = '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "<order_1>"}}\n</tool_call>'


class _FixedText(LocalPolicy):
    def _generate(self, prompts, episode_ids=None, limits=None):
        ids = encode(self.tok, WRITES) + [self.tok.eos_token_id]
        return [(ids, [0.0] * len(ids)) for _ in prompts]


def _tok():
    texts = [render_conversation([{"role": "user", "content": f"order <order_{i % 9 + 1}> for Ann"}])
             for i in range(50)]
    return train_bpe(texts, vocab_size=400, extra_tokens=VIEW.extra_tokens)


def test_reference_tokens_are_single_tokens():
    tok = _tok()
    for ref in ("<email_1>", "<order_24>", "<name_8>"):
        assert len(encode(tok, ref)) == 1 and decode(tok, encode(tok, ref)) == ref


def test_the_model_reads_references_and_its_call_is_expanded():
    tok = _tok()
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64))
    policy = _FixedText(model, tok, max_new_tokens=8, view=VIEW)
    msgs = [{"role": "system", "content": "s"},
            {"role": "user", "content": "Hi, I'm Ann Lee (ann.lee1234@example.com); where is order #W7654321?"}]
    reply = asyncio.run(policy.act("e", msgs))
    call = reply["tool_calls"][0]["function"]
    assert call["name"] == "get_order_details" and json.loads(call["arguments"]) == {"order_id": "#W7654321"}
    assert reply["raw"].startswith(WRITES)
    seen = decode(tok, policy.pop_trace("e").input_ids)
    assert "Hi, I'm <name_1> <name_2> (<email_1>); where is order <order_1>?" in seen
    assert "#W7654321" not in seen and "ann.lee" not in seen


class _FixedRefund(LocalPolicy):
    def _generate(self, prompts, episode_ids=None, limits=None):
        ids = encode(self.tok, "The refund goes to your <payment_1>.") + [self.tok.eos_token_id]
        return [(ids, [0.0] * len(ids)) for _ in prompts]


def test_with_payment_refs_the_model_reads_payment_descriptions_and_its_reference_reads_as_the_method():
    view = ChatView(compact_results=True, refs=True, payment_refs=True)
    tok = _tok()
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64))
    policy = _FixedRefund(model, tok, max_new_tokens=8, view=view, adopt_history=True)
    user = {"name": {"first_name": "Ann", "last_name": "Lee"}, "orders": ["#W7654321"], "address": {},
            "payment_methods": {"paypal_7732922": {"source": "paypal", "id": "paypal_7732922"},
                                "credit_card_4421486": {"source": "credit_card", "brand": "mastercard",
                                                        "last_four": "9876", "id": "credit_card_4421486"}}}
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "Refund my card, please."},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "get_user_details", "arguments": json.dumps({"user_id": "ann_lee_1234"})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps(user)}]
    reply = asyncio.run(policy.act("e", msgs))
    # what the customer reads: the card as a person names it, with its id
    assert reply["content"] == "The refund goes to your Mastercard card ending in 9876 (credit_card_4421486)."
    seen = decode(tok, policy.pop_trace("e").input_ids)
    assert '"<payment_1>":"Mastercard card ending in <num_1>"' in seen and '"<payment_2>":"PayPal account"' in seen
    assert "credit_card_4421486" not in seen
