"""Training on the distribution the sampler drew from: a constrained rollout records what each
constrained token was allowed, and the trainer's current and reference log-probs renormalise over
it, so forced tokens carry no gradient and a negative advantage never pushes forbidden tokens up."""

import asyncio

import pytest
import torch

from rl.chat.format import TOOL_CALL_OPEN, render_conversation
from rl.chat.views import REF_TOKENS, ChatView
from rl.grpo.algorithm import grpo_token_loss
from rl.grpo.logprobs import micro_batches, token_logprobs
from rl.grpo.trainer import GRPOConfig, GRPOTrainer
from rl.models.generation import unpack_allowed
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import train_bpe
from rl.policies.local import LocalPolicy

TOOLS = [
    {"type": "function", "function": {"name": "cancel_pending_order", "parameters": {
        "type": "object", "required": ["order_id", "reason"], "properties": {
            "order_id": {"type": "string"},
            "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"]}}}}},
    {"type": "function", "function": {"name": "get_order_details", "parameters": {
        "type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}}},
]
VIEW = ChatView(refs=True, constrain_calls=True, shown_refs_in_text=True)


@pytest.fixture(scope="module")
def tok():
    texts = [render_conversation([
        {"role": "user", "content": f"Please cancel <order_{1 + i % 3}>, number {i}."},
        {"role": "assistant", "content": "Sure.", "tool_calls": [{"function": {
            "name": "cancel_pending_order",
            "arguments": {"order_id": f"<order_{1 + i % 3}>", "reason": "no longer needed"}}}]},
        {"role": "tool", "content": '{"status": "cancelled"}'},
        {"role": "assistant", "content": f"Done, <order_{1 + i % 3}> is cancelled."}]) for i in range(80)]
    return train_bpe(texts, vocab_size=400, extra_tokens=REF_TOKENS)


def _model(tok, seed):
    torch.manual_seed(seed)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64))
    bias = torch.zeros(len(tok))
    bias[tok.convert_tokens_to_ids(TOOL_CALL_OPEN)] = 4.0  # turns open calls often, and write free text too
    with torch.no_grad():
        model.get_output_embeddings().bias = torch.nn.Parameter(bias)
    return model


def _rollouts(model, tok, n=4, seed=5, temperature=1.0):
    """`n` three-turn conversations sampled under the grammar and the shown-references mask."""
    policy = LocalPolicy(model, tok, max_new_tokens=60, seed=seed, view=VIEW, temperature=temperature)

    async def one(k):
        msgs = [{"role": "system", "content": "agent"},
                {"role": "user", "content": "Cancel order #W1234567 please, it is no longer needed."}]
        for _ in range(3):
            msgs.append(await policy.act(f"e{k}", msgs, TOOLS))
            msgs.append({"role": "user", "content": "ok"})
        return policy.pop_trace(f"e{k}")

    async def main():
        return await asyncio.gather(*(one(k) for k in range(n)))

    traces = list(asyncio.run(main()))
    for i, t in enumerate(traces):
        t.group, t.task_id, t.reward = "g", "g", float(i % 2)
        t.info = {"turns": 3, "tool_calls": {}}
    return traces


def _forced(trace):
    return [p for p, (k, _) in trace.constrained.items()
            if int(unpack_allowed([trace.masks[k]], 10_000).sum()) == 1]


def test_rollouts_record_what_the_constraint_allowed(tok):
    model = _model(tok, 0)
    traces = _rollouts(model, tok)
    for t in traces:
        assert t.constrained and all(t.loss_mask[p] for p in t.constrained)
        assert len(t.masks) == len(set(t.masks))  # each allowed set stored once
        for p, (k, lp) in t.constrained.items():
            allowed = unpack_allowed([t.masks[k]], len(tok))[0]
            assert allowed[t.input_ids[p]]  # the sampled token was allowed
            assert t.logprobs[p] <= lp + 1e-6 <= 1e-6  # renormalising over fewer tokens raises the log-prob
    forced = [p for t in traces for p in _forced(t)]
    assert forced  # `</tool_call>` after a complete call at least
    assert all(t.constrained[p][1] == 0.0 for t in traces for p in _forced(t))


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_behaviour_logprobs_equal_the_trainers_at_step_zero(tok, tmp_path, temperature):
    model = _model(tok, 1)
    traces = _rollouts(model, tok, temperature=temperature)
    trainer = GRPOTrainer(model, tok, ["g"], lambda *a: [], GRPOConfig(temperature=temperature), tmp_path)
    model.eval()
    for held in (True, False):
        for mb in micro_batches(traces, 100_000, tok.pad_token_id, constrained=True):
            with torch.no_grad():
                lp, _ = token_logprobs(model, mb, constrained=held, temperature=temperature)
                ref, _ = token_logprobs(trainer.ref, mb, constrained=held, temperature=temperature)
                untempered, _ = token_logprobs(model, mb, constrained=held)
            old = mb.old_held if held else mb.old_logp
            on = mb.loss_mask.bool()
            assert torch.allclose(lp[on], old[on], atol=1e-5), (held, (lp[on] - old[on]).abs().max())
            free = on & (lp != 0)  # forced tokens are 0 at any temperature
            # the sampler's log-probs are those of the tempered distribution, not the model's own
            assert torch.allclose(untempered[free], old[free], atol=1e-5) == (temperature == 1.0)
            assert torch.equal(lp, ref)
            if held:  # under the constraint a forced token's log-prob is exactly 0, unmasked it is not
                forced = torch.zeros_like(on)
                forced[mb.con_rows[mb.con_forced], mb.con_pos[mb.con_forced]] = True
                assert forced.any() and (lp[forced] == 0).all()
            else:
                assert (lp[on] < 0).all()
    m = trainer.update(traces)
    assert m["clip_frac"] == 0.0 and m["kl"] == pytest.approx(0.0, abs=1e-6)  # ratio 1, reference = policy
    assert 0.0 < m["forced_frac"] < m["constrained_frac"] <= 1.0


@pytest.mark.parametrize("held", [True, False])
def test_forced_tokens_get_gradient_only_without_the_constraint(tok, held):
    model = _model(tok, 2)
    traces = _rollouts(model, tok, n=2)
    mb = next(micro_batches(traces, 100_000, tok.pad_token_id, constrained=True))
    lp, _ = token_logprobs(model, mb, constrained=held)
    forced = torch.zeros_like(mb.loss_mask)
    forced[mb.con_rows[mb.con_forced], mb.con_pos[mb.con_forced]] = 1.0
    adv = torch.full_like(lp, -1.0)
    loss, _ = grpo_token_loss(lp, mb.old_held if held else mb.old_logp, None, adv, forced, kl_coef=0.0)
    model.zero_grad()
    loss.backward()
    grad = sum(float(p.grad.abs().sum()) for p in model.parameters() if p.grad is not None)
    assert (grad == 0.0) if held else (grad > 0.0)


@pytest.mark.parametrize("held", [True, False])
def test_a_negative_advantage_never_pushes_forbidden_tokens_up(tok, held):
    """The gradient of the loss at the logits of every constrained position: under the constraint
    the forbidden tokens' logits get none (the update moves only the allowed ones: the probability
    a negative advantage takes from the sampled token goes to the other allowed tokens); without it,
    every forbidden token's logit is pushed up."""
    model = _model(tok, 3)
    traces = _rollouts(model, tok, n=2)
    mb = next(micro_batches(traces, 100_000, tok.pad_token_id, constrained=True))
    kept: list[torch.Tensor] = []

    def keep(_module, _inputs, out):
        out.retain_grad()
        kept.append(out)

    handle = model.get_output_embeddings().register_forward_hook(keep)
    try:
        lp, _ = token_logprobs(model, mb, constrained=held)
    finally:
        handle.remove()
    on = torch.zeros_like(mb.loss_mask)
    on[mb.con_rows, mb.con_pos] = 1.0
    adv = torch.full_like(lp, -1.0)
    loss, _ = grpo_token_loss(lp, mb.old_held if held else mb.old_logp, None, adv, on, kl_coef=0.0)
    loss.backward()
    grad = kept[0].grad[mb.con_rows, mb.con_pos - 1]  # logits at t-1 predict the token at t
    allowed = unpack_allowed(mb.masks, grad.shape[-1])[mb.con_mask]
    forbidden = grad[~allowed]
    assert forbidden.numel() > 0
    if held:
        assert (forbidden == 0).all()
    else:  # descent moves a logit against its gradient: every forbidden logit goes up
        assert (forbidden < 0).all()
    # either way the sampled tokens are pushed down
    target = mb.input_ids[mb.con_rows, mb.con_pos]
    picked = grad.gather(-1, target[:, None]).squeeze(-1)
    free = ~mb.con_forced if held else torch.ones_like(mb.con_forced)
    assert (picked[free] > 0).all()
