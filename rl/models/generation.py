"""Batched generation for local models: one call continues many token prompts at once (left padded),
sampling at a temperature (1.0 for rollouts) or greedily (evaluation), and returns for every prompt
the new token ids, the log-prob each was sampled with (from the untempered distribution when
temperature is 1.0 and there is no top-k/top-p, i.e. exactly the policy's log-prob) and whether the
turn ended with the end-of-turn token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel


@dataclass
class Generation:
    ids: list[int]
    logprobs: list[float]
    finished: bool  # ended with eos (else cut off at max_new_tokens)


@torch.no_grad()
def generate_batch(model: PreTrainedModel, prompts: list[list[int]], *, max_new_tokens: int, eos_id: int,
                   pad_id: int, temperature: float = 1.0, greedy: bool = False,
                   generator: torch.Generator | None = None) -> list[Generation]:
    """Continue every prompt until eos or `max_new_tokens`; KV-cached, one forward per new token."""
    if not prompts:
        return []
    device = next(model.parameters()).device
    n = len(prompts)
    width = max(len(p) for p in prompts)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    for i, p in enumerate(prompts):
        input_ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
        attention[i, width - len(p):] = 1
    input_ids, attention = input_ids.to(device), attention.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True,
                logits_to_keep=1)
    cache = out.cache
    logits = out.logits[:, -1, :]
    next_pos = positions[:, -1] + 1
    new_ids: list[list[int]] = [[] for _ in range(n)]
    new_lp: list[list[float]] = [[] for _ in range(n)]
    done = torch.zeros(n, dtype=torch.bool, device=device)
    finished = [False] * n
    for _ in range(max_new_tokens):
        logp = torch.log_softmax(logits.float(), dim=-1)
        if greedy:
            tok = logp.argmax(-1)
        else:
            probs = torch.softmax(logits.float() / temperature, dim=-1)
            tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        tok_lp = logp.gather(-1, tok[:, None]).squeeze(-1)
        tok = torch.where(done, torch.full_like(tok, pad_id), tok)
        for i in (~done).nonzero().flatten().tolist():
            t = int(tok[i])
            new_ids[i].append(t)
            new_lp[i].append(float(tok_lp[i]))
            if t == eos_id:
                finished[i] = True
        done = done | (tok == eos_id)
        if bool(done.all()):
            break
        attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=-1)
        out = model(input_ids=tok[:, None], attention_mask=attention, position_ids=next_pos[:, None],
                    cache=cache, use_cache=True)
        cache = out.cache
        logits = out.logits[:, -1, :]
        next_pos = next_pos + 1
    return [Generation(ids=new_ids[i], logprobs=new_lp[i], finished=finished[i]) for i in range(n)]
