"""Loss-mask exactness: the mask-1 tokens of a trace are exactly what the agent generated."""

from rl.chat.format import parse_reply
from rl.grpo.trace import TraceBuilder, trace_from_messages
from rl.models.generation import generate_batch
from rl.models.tokenizer import decode, encode


def test_mask_one_tokens_decode_to_exactly_the_generated_text(tiny_tok, tiny_model):
    tok = tiny_tok
    builders = [TraceBuilder(tok) for _ in range(3)]
    generated_text = [[] for _ in builders]
    for i, b in enumerate(builders):
        b.add_system("You are a store agent.", [{"type": "function", "function": {"name": "think"}}])
        b.add_message({"role": "user", "content": f"Hello, order #W{i}"})
    for turn in range(3):
        prompts = [b.open_assistant_turn() for b in builders]
        outs = generate_batch(tiny_model, [list(p) for p in prompts], max_new_tokens=12 + 5 * turn,
                              eos_id=tok.eos_token_id, pad_id=tok.pad_token_id)
        for i, (b, g) in enumerate(zip(builders, outs, strict=True)):
            b.add_generated(g.ids, g.logprobs)
            generated_text[i].append(decode(tok, g.ids))
            parse_reply(generated_text[i][-1])  # random text never crashes the parser
            if turn % 2 == 0:
                b.add_tool_results(['{"ok": true}'])
            else:
                b.add_message({"role": "user", "content": "thanks"})
    for b, texts in zip(builders, generated_text, strict=True):
        tr = b.trace
        assert len(tr.input_ids) == len(tr.loss_mask) == len(tr.logprobs)
        assert decode(tok, tr.generated_ids()) == "".join(texts)
        assert all(lp < 0 for lp, m in zip(tr.logprobs, tr.loss_mask, strict=True) if m)
        # earlier turns are never re-rendered: the prefix at each turn is a prefix of the final trace
        assert decode(tok, tr.input_ids).startswith("<|im_start|>system\nYou are a store agent.")


def test_sft_trace_masks_only_assistant_tokens(tiny_tok):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Status of #W1?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "get_order_details", "arguments": {"order_id": "#W1"}}}]},
        {"role": "tool", "content": '{"status": "pending"}'},
        {"role": "assistant", "content": "It is pending."},
        {"role": "user", "content": "###STOP###"},
    ]
    tr = trace_from_messages(tiny_tok, messages)
    agent = decode(tiny_tok, tr.generated_ids())
    assert agent == ('<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": "#W1"}}\n'
                     "</tool_call><|im_end|>It is pending.<|im_end|>")
    # unmasked text contains the user's, tool's and system's words, never the agent's
    context = decode(tiny_tok, [t for t, m in zip(tr.input_ids, tr.loss_mask, strict=True) if not m])
    assert "Status of #W1?" in context and '{"status": "pending"}' in context and "pending." not in context
    assert decode(tiny_tok, tr.input_ids).count("<think>\n\n</think>\n\n") == 2
    assert encode(tiny_tok, "<|im_end|>")[0] in tr.generated_ids()


def test_an_agent_message_marked_not_to_train_is_context(tiny_tok):
    """A retracted proposal (`"train": false`) is shown to the model but carries no loss; the text of
    the conversation does not change."""
    messages = [
        {"role": "user", "content": "Cancel #W1, I ordered it by mistake."},
        {"role": "assistant", "content": "Cancel #W1 as no longer needed (yes/no)?", "train": False},
        {"role": "user", "content": "No, I ordered it by mistake."},
        {"role": "assistant", "content": "Cancel #W1 as ordered by mistake (yes/no)?"},
    ]
    marked = trace_from_messages(tiny_tok, messages)
    plain = trace_from_messages(tiny_tok, [{k: v for k, v in m.items() if k != "train"} for m in messages])
    assert decode(tiny_tok, marked.input_ids) == decode(tiny_tok, plain.input_ids)
    assert decode(tiny_tok, marked.generated_ids()) == "Cancel #W1 as ordered by mistake (yes/no)?<|im_end|>"
    assert "no longer needed" in decode(tiny_tok, plain.generated_ids())
