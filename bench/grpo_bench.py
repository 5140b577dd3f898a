"""GRPO throughput on the tiny Qwen3 recipe, side by side with plain baselines (one run):
- policy update (reference log-probs + forward/backward over rollout tokens) vs a plain
  forward+backward of the same model on the same batch, in tokens/s (target: >= 70%);
- rollout generation through LocalPolicy (KV cache, sampling log-probs) vs plain batched
  `model.generate` of the same model on the same prompts, in new tokens/s;
- multi-turn episodes with each episode's KV cache kept across its turns vs re-processing the whole
  conversation every turn (seconds for the same 4-turn conversations);
- tool-call generation under the call grammar (rl/chat/call_grammar.py; every new token masked) vs
  the same generation unconstrained, in new tokens/s, with the one-off cost of building the masks;
- free text with the references a conversation has not shown masked (`CallConstraint`'s
  `text_refs`, the `cpu-tiny` view's `shown_refs_in_text`) vs the same free text unmasked.
Usage: .venv/bin/python bench/grpo_bench.py [--traces 16] [--length 1024] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time

import torch

from rl.chat.views import REF_TOKENS
from rl.grpo.logprobs import micro_batches, token_logprobs
from rl.grpo.trace import Trace
from rl.grpo.trainer import GRPOConfig, GRPOTrainer
from rl.models.tiny import build_tiny_model, n_parameters
from rl.models.tokenizer import train_bpe
from rl.policies.local import LocalPolicy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=16)
    ap.add_argument("--length", type=int, default=1024)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(2)
    rng = random.Random(0)
    words = [f"w{i}" for i in range(3000)]
    tok = train_bpe([" ".join(rng.choice(words) for _ in range(400)) for _ in range(400)], vocab_size=4096,
                    extra_tokens=REF_TOKENS)
    model = build_tiny_model(tok)
    vocab = len(tok) - 20
    traces = []
    for i in range(a.traces):
        n = a.length - rng.randint(0, a.length // 4)
        mask = [0] * (n // 2) + [1] * (n - n // 2)
        traces.append(Trace(input_ids=[rng.randrange(20, vocab) for _ in range(n)], logprobs=[-8.0] * n,
                            loss_mask=mask, group=str(i // 4), reward=float(i % 2)))
    tokens = sum(len(t) for t in traces)
    model.train()
    warm = next(micro_batches(traces[:2], 8192, tok.pad_token_id))  # first-call allocations
    token_logprobs(model, warm)[0].sum().backward()
    t0 = time.perf_counter()
    for mb in micro_batches(traces, 8192, tok.pad_token_id):
        lp, _ = token_logprobs(model, mb)
        (-(lp * mb.loss_mask).sum() / tokens).backward()
    plain = tokens / (time.perf_counter() - t0)
    trainer = GRPOTrainer(model, tok, [0], lambda *x: [], GRPOConfig(lr=1e-6), tempfile.mkdtemp())
    grpo = trainer.update(traces)["update_tokens_per_s"]
    prompts = [[rng.randrange(20, vocab) for _ in range(a.length // 2)] for _ in range(a.traces)]
    model.eval()
    policy = LocalPolicy(model, tok, max_new_tokens=a.new_tokens)
    policy._generate(prompts[:2])  # warm-up
    t0 = time.perf_counter()
    outs = policy._generate(prompts)
    ours = sum(len(o[0]) for o in outs) / (time.perf_counter() - t0)
    width = max(map(len, prompts))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prompts])
    att = torch.ones_like(ids)
    t0 = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=att, max_new_tokens=a.new_tokens,
                         min_new_tokens=a.new_tokens, do_sample=True, top_k=0, top_p=1.0)
    hf = (out.shape[1] - width) * len(prompts) / (time.perf_counter() - t0)
    constrained = _constrained_calls(model, tok, prompts, a)
    reuse = _multi_turn(model, tok, rng, vocab, a, reuse_cache=True)
    fresh = _multi_turn(model, tok, rng, vocab, a, reuse_cache=False)
    result = {"parameters": n_parameters(model), "batch_tokens": tokens,
              "plain_fwd_bwd_tokens_per_s": plain, "grpo_update_tokens_per_s": grpo,
              "update_ratio": grpo / plain, "rollout_new_tokens_per_s": ours,
              "hf_generate_new_tokens_per_s": hf, "generation_ratio": ours / hf,
              "multi_turn_seconds_kv_reused": reuse, "multi_turn_seconds_reprocessed": fresh,
              "multi_turn_speedup": fresh / reuse, **constrained}
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:32s} {v:,.3f}" if isinstance(v, float) else f"{k:32s} {v}")


CALL_TOOLS = [
    {"type": "function", "function": {"name": "get_order_details", "parameters": {
        "type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {"name": "cancel_pending_order", "parameters": {
        "type": "object", "required": ["order_id", "reason"], "properties": {
            "order_id": {"type": "string"},
            "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"]}}}}},
]


def _constrained_calls(model, tok, prompts, a) -> dict[str, float]:
    """Every row has just opened a tool call: generation with the grammar masking each new token vs
    the same prompts unconstrained (new tokens/s, masks already built), and the masks' build time."""
    from rl.chat.call_grammar import CallConstraint, ToolCallGrammar
    from rl.chat.format import TOOL_CALL_OPEN
    from rl.models.generation import generate_continuing

    opened = [p + [tok.convert_tokens_to_ids(TOOL_CALL_OPEN)] for p in prompts]
    n = len(opened)
    t0 = time.perf_counter()
    grammar = ToolCallGrammar(CALL_TOOLS, tok)
    build = time.perf_counter() - t0

    def timed(rows: list[list[int]], constraint: CallConstraint | None) -> float:
        """New tokens/s generating from `rows` under `constraint`."""
        t0 = time.perf_counter()
        gens, _ = generate_continuing(model, rows, [None] * n, max_new_tokens=a.new_tokens,
                                      eos_id=tok.eos_token_id, pad_id=tok.pad_token_id,
                                      generator=torch.Generator().manual_seed(0), constraint=constraint,
                                      return_caches=False)
        return sum(len(g.ids) for g in gens) / (time.perf_counter() - t0)

    def in_calls() -> CallConstraint:  # every row inside the call it has just opened
        constraint = CallConstraint([grammar] * n)
        constraint.states = [grammar.start()] * n
        return constraint

    t0 = time.perf_counter()
    timed(opened, in_calls())  # builds the masks of the states these calls visit
    build += time.perf_counter() - t0
    free, held = timed(opened, None), timed(opened, in_calls())
    # free text (rows outside a call), with and without the references the rows have not shown masked
    refs = ToolCallGrammar(CALL_TOOLS, tok, text_tokens=REF_TOKENS)
    shown = [frozenset({"<order_1>"})] * n
    text_free = timed(prompts, CallConstraint([refs] * n, shown, text_refs=False))
    text_held = timed(prompts, CallConstraint([refs] * n, shown, text_refs=True))
    return {"call_new_tokens_per_s_unconstrained": free, "call_new_tokens_per_s_constrained": held,
            "constrained_ratio": held / free, "grammar_first_use_seconds": build,
            "text_new_tokens_per_s_any_refs": text_free, "text_new_tokens_per_s_shown_refs": text_held,
            "text_refs_ratio": text_held / text_free}


def _multi_turn(model, tok, rng, vocab, a, *, reuse_cache: bool) -> float:
    """Seconds for 4 agent turns of `traces` conversations that grow by 300 tokens (tool results)
    between turns, with each episode's KV cache kept across turns or the whole prompt re-processed."""
    import asyncio

    policy = LocalPolicy(model, tok, max_new_tokens=a.new_tokens, reuse_cache=reuse_cache, seed=1)
    r = random.Random(7)

    async def episode(k: int) -> None:
        msgs = [{"role": "system", "content": "bench"}]
        for _ in range(4):
            msgs.append({"role": "user", "content": " ".join(f"w{r.randrange(3000)}" for _ in range(150))})
            msgs.append(await policy.act(f"e{k}", msgs))

    async def main() -> None:
        await asyncio.gather(*(episode(k) for k in range(a.traces)))

    t0 = time.perf_counter()
    asyncio.run(main())
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
