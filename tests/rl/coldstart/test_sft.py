"""SFT: loss falls on a small fixed set, and only assistant tokens carry loss."""

import torch

from rl.chat.format import render_conversation
from rl.coldstart.sft import SFTConfig, build_traces, sft_loss, sft_train
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import train_bpe

torch.set_num_threads(2)
MICRO = TinyQwen3Recipe(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                        head_dim=32, intermediate_size=128)


def _records(n=12):
    out = []
    for i in range(n):
        oid = f"#W{4000 + 13 * i}"
        out.append({"tools": [{"type": "function", "function": {"name": "get_order_details"}}], "messages": [
            {"role": "system", "content": "You help customers."},
            {"role": "user", "content": f"What is the status of {oid}?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "get_order_details", "arguments": {"order_id": oid}}}]},
            {"role": "tool", "content": '{"status": "pending"}'},
            {"role": "assistant", "content": f"Order {oid} is pending."},
        ]})
    return out


def test_sft_loss_falls_on_a_small_fixed_set():
    recs = _records()
    tok = train_bpe([render_conversation(r["messages"], r["tools"]) for r in recs], vocab_size=400)
    model = build_tiny_model(tok, MICRO)
    traces, dropped = build_traces(tok, recs, 4096)
    assert dropped == 0
    start, _, _ = sft_loss(model, traces, 4096, tok.pad_token_id, backward=False)
    history = sft_train(model, tok, recs, SFTConfig(epochs=25, batch_size=6, lr=1e-2, warmup_steps=2))
    end, _, _ = sft_loss(model, traces, 4096, tok.pad_token_id, backward=False)
    assert len(history) == 50
    assert end < 0.3 * start, (start, end)


def test_loss_ignores_everything_but_assistant_tokens():
    recs = _records(2)
    tok = train_bpe([render_conversation(r["messages"], r["tools"]) for r in recs], vocab_size=300)
    model = build_tiny_model(tok, MICRO)
    a, _ = build_traces(tok, recs, 4096)
    changed = [r | {"messages": [*r["messages"][:3], {"role": "tool", "content": "something else entirely"},
                                 r["messages"][4]]} for r in recs]
    b, _ = build_traces(tok, changed, 4096)
    # different tool output (context) changes the loss only through conditioning, never by being scored
    assert [t.n_generated for t in a] == [t.n_generated for t in b]
    la, na, _ = sft_loss(model, a, 4096, tok.pad_token_id, backward=False)
    assert na == sum(t.n_generated for t in a) and la > 0
