"""Decoding with finished rows leaving the batch (`generate_continuing(compact=True)`, the default)
against the batch that keeps them to the end (`compact=False`), side by side in one run: seconds
per batch of turns, new tokens/s, the ratio, and whether both wrote the same tokens.

A rollout or evaluation batch holds the next turns of up to 64 conversations of different
lengths; a turn ends at its end-of-turn token, most long before the batch's longest, and a
decoding step reads every cached row's keys and values.

With `--run DIR` (a `muarl experiment paper-table` output folder) the batch is that run's cold start
writing real assistant turns: each prompt is a cold-start conversation cut where one of its
assistant turns begins, so context and turn lengths are the model's own. Without it, a randomly
initialised model of the cpu-tiny shape on random prompts of 300-2,500 tokens, its end-of-turn logit
raised so that turns end after about 26 tokens (the mean of a cpu-tiny GRPO rollout's turns).
Usage: .venv/bin/python bench/decode_compaction_bench.py [--run var/run/NAME] [--batch 64] [--repeats 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from rl.models.generation import generate_continuing


def real_batch(run: Path, n: int, seed: int) -> tuple[torch.nn.Module, list[list[int]], int, int]:
    from rl.coldstart.sft import build_traces, read_records
    from rl.experiment.recipe import ExperimentRecipe
    from rl.models.tiny import load_model_folder

    model, tok, _ = load_model_folder(run / "models" / "cold_start")
    recipe = ExperimentRecipe.model_validate_json((run / "recipe.json").read_text())
    records = read_records(run / "coldstart" / "filtered.jsonl")
    view = recipe.view_with_names(records)  # the conversations as the model was trained on them
    traces, _ = build_traces(tok, [view.record(r) for r in records], max_tokens=recipe.max_context)
    starts = [(t, i) for t in traces for i in range(1, len(t.loss_mask))
              if t.loss_mask[i] and not t.loss_mask[i - 1]]
    rng = random.Random(seed)
    prompts = [t.input_ids[:i] for t, i in rng.sample(starts, n)]
    return model.eval(), prompts, int(tok.eos_token_id), int(tok.pad_token_id)


def random_batch(n: int, seed: int) -> tuple[torch.nn.Module, list[list[int]], int, int]:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from rl.experiment.recipe import RECIPES

    shape = RECIPES["cpu-tiny"].model
    torch.manual_seed(seed)
    vocab, eos, pad = RECIPES["cpu-tiny"].vocab_size, 1, 0
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=vocab, hidden_size=shape.hidden_size, num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads, num_key_value_heads=shape.num_key_value_heads,
        head_dim=shape.head_dim, intermediate_size=shape.intermediate_size,
        max_position_embeddings=shape.max_position_embeddings, tie_word_embeddings=True,
        eos_token_id=eos, pad_token_id=pad)).eval()
    # near-uniform logits: raise end-of-turn so that it is drawn with probability ~1/26 per token
    bias = float(torch.log(torch.tensor(vocab / 25.0)))
    model.lm_head.register_forward_hook(lambda module, inputs, out: out.index_add_(
        -1, torch.tensor([eos]), torch.full((*out.shape[:-1], 1), bias)))
    rng = random.Random(seed)
    prompts = [[rng.randrange(2, vocab) for _ in range(rng.randint(300, 2500))] for _ in range(n)]
    return model, prompts, eos, pad


def cached_prefixes(model, prompts, eos, pad, new_part: int) -> list:
    """Each conversation's cache up to its last `new_part` tokens, as a rollout keeps it between turns
    (a turn then processes only the new customer message or tool results)."""
    _, caches = generate_continuing(model, [p[:-new_part] for p in prompts], [None] * len(prompts),
                                    max_new_tokens=1, eos_id=eos, pad_id=pad, greedy=True)
    return caches


def timed(model, prompts, caches, eos, pad, *, compact: bool, new_tokens: int, seed: int) -> tuple[float, list]:
    t0 = time.perf_counter()
    gens, _ = generate_continuing(model, prompts, caches, max_new_tokens=new_tokens, eos_id=eos, pad_id=pad,
                                  generator=torch.Generator().manual_seed(seed), compact=compact)
    return time.perf_counter() - t0, gens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, default=None)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=80)  # cpu-tiny's max_new_tokens
    ap.add_argument("--new-part", type=int, default=40)  # tokens of a turn's new message, not yet cached
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)  # a paper-table worker's
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model, prompts, eos, pad = (real_batch(a.run, a.batch, a.seed) if a.run else random_batch(a.batch, a.seed))
    caches = cached_prefixes(model, prompts, eos, pad, a.new_part)
    secs: dict[bool, list[float]] = {True: [], False: []}
    same, tokens = True, 0
    for r in range(a.repeats):  # alternately, so that a drift in machine speed hits both
        for compact in ((True, False) if r % 2 == 0 else (False, True)):
            s, gens = timed(model, prompts, caches, eos, pad, compact=compact, new_tokens=a.new_tokens, seed=a.seed + r)
            secs[compact].append(s)
            if compact:
                kept = gens
            else:
                ref = gens
        same = same and [g.ids for g in kept] == [g.ids for g in ref]
        tokens = sum(len(g.ids) for g in ref)
    lengths = sorted(len(g.ids) for g in ref)
    out = {
        "model": str(a.run / "models" / "cold_start") if a.run else "random cpu-tiny shape, end of turn raised",
        "rows": len(prompts), "prompt_tokens_mean": sum(map(len, prompts)) / len(prompts),
        "prompt_tokens_max": max(map(len, prompts)),
        "turn_tokens_median": lengths[len(lengths) // 2], "turn_tokens_max": lengths[-1],
        "seconds_compact": min(secs[True]), "seconds_kept": min(secs[False]),
        "new_tokens_per_s_compact": tokens / min(secs[True]), "new_tokens_per_s_kept": tokens / min(secs[False]),
        "speedup": min(secs[False]) / min(secs[True]), "same_tokens": same,
    }
    if a.json:
        print(json.dumps(out))
        return
    for k, v in out.items():
        print(f"{k:28s} {v:.3f}" if isinstance(v, float) else f"{k:28s} {v}")


if __name__ == "__main__":
    main()
