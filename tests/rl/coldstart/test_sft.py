"""SFT: loss falls on a small fixed set, and only assistant tokens carry loss."""

import torch

from rl.chat.format import render_conversation
from rl.coldstart.sft import SFTConfig, build_traces, sft_train
from rl.grpo.logprobs import nll_loss
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
    start, _, _ = nll_loss(model, traces, 4096, tok.pad_token_id, backward=False)
    history = sft_train(model, tok, recs, SFTConfig(epochs=25, batch_size=6, lr=1e-2, warmup_steps=2))
    end, _, _ = nll_loss(model, traces, 4096, tok.pad_token_id, backward=False)
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
    la, na, _ = nll_loss(model, a, 4096, tok.pad_token_id, backward=False)
    assert na == sum(t.n_generated for t in a) and la > 0


def test_input_noise_inserts_only_into_customer_messages():
    import random

    from rl.coldstart.sft import customer_spans, with_input_noise

    recs = _records(2)
    tok = train_bpe([render_conversation(r["messages"], r["tools"]) for r in recs], vocab_size=300)
    trace = build_traces(tok, recs, 4096)[0][0]
    spans = customer_spans(tok, trace)
    assert [tok.decode(trace.input_ids[a:b]) for a, b in spans] == ["What is the status of #W4000?"]
    vocab = [i for i in range(len(tok)) if i not in set(tok.all_special_ids)]
    noisy = with_input_noise(trace, spans, random.Random(0), 0.5, vocab)
    added = len(noisy) - len(trace)
    assert 0 < added <= spans[0][1] - spans[0][0]
    # everything outside the customer's words is untouched, before and after it, loss mask included
    a, b = spans[0]
    assert noisy.input_ids[:a] == trace.input_ids[:a] and noisy.loss_mask[:a] == trace.loss_mask[:a]
    assert noisy.input_ids[b + added:] == trace.input_ids[b:] and noisy.loss_mask[b + added:] == trace.loss_mask[b:]
    # the customer's own tokens are all still there, in order, with no loss on anything inserted
    inside = noisy.input_ids[a:b + added]
    it = iter(inside)
    assert all(t in it for t in trace.input_ids[a:b])
    assert noisy.loss_mask[a:b + added] == [0] * (b - a + added) and noisy.n_generated == trace.n_generated
    assert all(t in vocab for t in inside if t not in trace.input_ids[a:b])
    assert with_input_noise(trace, spans, random.Random(0), 0.0, vocab).input_ids == trace.input_ids


def test_sft_with_input_noise_still_learns():
    recs = _records()
    tok = train_bpe([render_conversation(r["messages"], r["tools"]) for r in recs], vocab_size=400)
    model = build_tiny_model(tok, MICRO)
    traces, _ = build_traces(tok, recs, 4096)
    start, _, _ = nll_loss(model, traces, 4096, tok.pad_token_id, backward=False)
    sft_train(model, tok, recs, SFTConfig(epochs=25, batch_size=6, lr=1e-2, warmup_steps=2, input_noise=0.2))
    end, _, _ = nll_loss(model, traces, 4096, tok.pad_token_id, backward=False)
    assert end < 0.3 * start, (start, end)
