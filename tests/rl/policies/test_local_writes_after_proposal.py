"""With `writes_after_proposal`, a local policy calls a write tool only right after it asked the
customer to confirm a change: a model that prefers to write straight away asks first, and the tokens
it chose under that rule are recorded as constrained (what GRPO trains on)."""

import asyncio
import json

import torch

from rl.chat.call_grammar import ToolCallGrammar
from rl.chat.format import render_conversation
from rl.chat.views import ChatView
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import encode, train_bpe
from rl.policies.local import LocalPolicy, asked_to_confirm

TOOLS = [{"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}}}
    for name in ("get_order_details", "cancel_pending_order")]
PROPOSAL = "To confirm, I will cancel order #W1. Do you confirm (yes/no)?"
CALL = '<tool_call>\n{"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}}\n</tool_call>'


def _call(name: str) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": name, "arguments": json.dumps({"order_id": "#W1"})}}]}


def test_a_write_is_allowed_only_after_a_request_to_confirm_and_once():
    user = {"role": "user", "content": "Cancel #W1."}
    assert not asked_to_confirm([user])
    assert not asked_to_confirm([user, {"role": "assistant", "content": "Which order?"}, user])
    asked = [user, {"role": "assistant", "content": PROPOSAL}, {"role": "user", "content": "yes"}]
    assert asked_to_confirm(asked)
    assert asked_to_confirm([*asked, _call("get_order_details"), {"role": "tool", "content": "{}"}])  # a read keeps it
    assert not asked_to_confirm([*asked, _call("cancel_pending_order"), {"role": "tool", "content": "{}"}])


def _tok():
    texts = [render_conversation([{"role": "user", "content": f"cancel order #W{i} please"},
                                  {"role": "assistant", "content": PROPOSAL + " " + CALL}]) for i in range(40)]
    return train_bpe(texts, vocab_size=500, extra_tokens=ChatView(refs=True).extra_tokens)


def test_a_policy_that_prefers_to_write_asks_first():
    tok = _tok()
    torch.manual_seed(5)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    bias = torch.zeros(len(tok))
    for t in encode(tok, CALL):
        bias[t] = 8.0  # the model would open a cancellation call at once
    with torch.no_grad():
        model.get_output_embeddings().bias = torch.nn.Parameter(bias)
    msgs = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Please cancel order #W1."}]

    def reply(view, conversation):
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, tok, max_new_tokens=40, view=view, adopt_history=True, seed=1)
        out = asyncio.run(policy.act("e", conversation, TOOLS))
        return out, policy.pop_trace("e")

    free, _ = reply(ChatView(constrain_calls=True), msgs)
    assert [c["function"]["name"] for c in free.get("tool_calls") or ()] == ["cancel_pending_order"]
    held, trace = reply(ChatView(constrain_calls=True, writes_after_proposal=True), msgs)
    assert not any(c["function"]["name"] == "cancel_pending_order" for c in held.get("tool_calls") or ()), held
    assert trace.constrained  # the tool name was chosen under the rule
    # after the agent asked and the customer answered, the same model writes
    asked = [*msgs, {"role": "assistant", "content": PROPOSAL}, {"role": "user", "content": "Yes, go ahead."}]
    after, _ = reply(ChatView(constrain_calls=True, writes_after_proposal=True), asked)
    assert [c["function"]["name"] for c in after.get("tool_calls") or ()] == ["cancel_pending_order"]


def test_the_grammar_without_write_tools_is_cached_and_keeps_the_others():
    g = ToolCallGrammar(TOOLS, _tok())
    sub = g.without(frozenset({"cancel_pending_order"}))
    assert set(sub.schemas) == {"get_order_details"} and g.without(frozenset({"cancel_pending_order"})) is sub
    assert g.without(frozenset({"modify_user_address"})) is g
    assert g.without(frozenset({"cancel_pending_order", "get_order_details"})) is g  # never no tool at all
