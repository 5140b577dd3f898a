"""Cold-start SFT: supervised fine-tuning on multi-turn tool-use conversations with the loss only on
tokens the assistant wrote (its messages, tool calls and end-of-turn tokens), exactly the tokens
GRPO later trains on. Conversations are rendered with the same appended layout as rollouts
(`trace_from_messages`). Loss is the token mean over all assistant tokens of an optimizer batch.
Defaults follow the paper (batch 128 conversations, 2 epochs, AdamW, lr 5e-6, cosine decay); the
tiny recipe sets its own. Input: JSONL records `{"messages": [...], "tools": [...]}`.

`input_noise` inserts random tokens into the customer's messages (never into tool results or the
agent's own tokens), drawn afresh for every batch: a model trained from scratch on our own text has
never seen most words a real customer may use, and a token it never read derails it (the held-out
customer's "Could you cancel ..." is answered with an address change); random tokens among the
words it knows teach it to read past the ones it does not. Nothing is removed, so every value the
agent must copy is still there.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog
import torch
from pydantic import BaseModel, Field
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl.chat.format import IM_END
from rl.grpo.logprobs import nll_loss
from rl.grpo.trace import Trace, trace_from_messages
from rl.models.tokenizer import encode, ordinary_ids

log = structlog.get_logger(__name__)


class SFTConfig(BaseModel):
    epochs: float = 2.0
    batch_size: int = 128
    lr: float = 5e-6
    min_lr_ratio: float = 0.0
    warmup_steps: int = 0
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    micro_batch_tokens: int = 8192
    max_tokens: int = 8192  # conversations longer than this are dropped (counted)
    # probability of a random token inserted before each token of a customer's message (module doc)
    input_noise: float = Field(default=0.0, ge=0.0, lt=1.0)
    seed: int = 0


def read_records(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def build_traces(tok: PreTrainedTokenizerBase, records: list[dict[str, Any]], max_tokens: int) -> tuple[
        list[Trace], int]:
    traces, dropped = [], 0
    for r in records:
        t = trace_from_messages(tok, r["messages"], r.get("tools"))
        if len(t) > max_tokens or t.n_generated == 0:
            dropped += 1
            continue
        traces.append(t)
    return traces, dropped


def customer_spans(tok: PreTrainedTokenizerBase, trace: Trace) -> list[tuple[int, int]]:
    """[start, end) of the words of each customer message in `trace`: a user turn's content, not a
    tool result (rendered as a user turn that opens with `<tool_response>`)."""
    head = encode(tok, "<|im_start|>user\n")
    tool, end = encode(tok, "<tool_response>"), encode(tok, IM_END)
    ids, spans, n = trace.input_ids, [], len(head)
    for i in range(len(ids) - n):
        if ids[i:i + n] != head or ids[i + n:i + n + len(tool)] == tool:
            continue
        j = i + n
        while j < len(ids) and ids[j:j + len(end)] != end:
            j += 1
        spans.append((i + n, j))
    return spans


def with_input_noise(trace: Trace, spans: list[tuple[int, int]], rng: random.Random, p: float,
                     vocab: Sequence[int]) -> Trace:
    """A copy of `trace` with a token drawn from `vocab` inserted before each customer token with
    probability `p`; inserted tokens are context (no loss)."""
    ids, mask, lps = trace.input_ids, trace.loss_mask, trace.logprobs
    out = Trace()
    cursor = 0
    for start, stop in spans:
        out.input_ids += ids[cursor:start]
        out.loss_mask += mask[cursor:start]
        out.logprobs += lps[cursor:start]
        for k in range(start, stop):
            if rng.random() < p:
                out.input_ids.append(rng.choice(vocab))
                out.loss_mask.append(0)
                out.logprobs.append(0.0)
            out.input_ids.append(ids[k])
            out.loss_mask.append(mask[k])
            out.logprobs.append(lps[k])
        cursor = stop
    out.input_ids += ids[cursor:]
    out.loss_mask += mask[cursor:]
    out.logprobs += lps[cursor:]
    return out


def sft_train(model: PreTrainedModel, tok: PreTrainedTokenizerBase, records: list[dict[str, Any]],
              cfg: SFTConfig, on_step: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    traces, dropped = build_traces(tok, records, cfg.max_tokens)
    if not traces:
        raise ValueError("no usable conversations for SFT (all empty or longer than max_tokens)")
    rng = random.Random(cfg.seed)
    noise_rng = random.Random(f"input-noise:{cfg.seed}")
    spans: list[list[tuple[int, int]]] = []
    vocab: list[int] = []
    if cfg.input_noise:  # the spans and the vocabulary only when there is noise to insert
        spans = [customer_spans(tok, t) for t in traces]
        vocab = ordinary_ids(tok)
    per_epoch = max(1, math.ceil(len(traces) / cfg.batch_size))
    total_steps = max(1, round(per_epoch * cfg.epochs))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    def lr_at(step: int) -> float:
        if step < cfg.warmup_steps:
            return cfg.lr * (step + 1) / cfg.warmup_steps
        p = (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps)
        return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p)))

    history: list[dict[str, Any]] = []
    order: list[int] = []
    model.train()
    for step in range(total_steps):
        if len(order) < cfg.batch_size:
            fresh = list(range(len(traces)))
            rng.shuffle(fresh)
            order += fresh
        batch = [with_input_noise(traces[i], spans[i], noise_rng, cfg.input_noise, vocab) if cfg.input_noise
                 else traces[i] for i in order[: cfg.batch_size]]
        order = order[cfg.batch_size:]
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss, n_assistant, n_tokens = nll_loss(model, batch, cfg.micro_batch_tokens, tok.pad_token_id)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip))
        opt.step()
        dt = time.perf_counter() - t0
        m = {"step": step + 1, "of": total_steps, "loss": loss, "lr": lr_at(step), "grad_norm": grad_norm,
             "assistant_tokens": n_assistant, "tokens": n_tokens, "tokens_per_s": n_tokens / dt,
             "dropped": dropped}
        history.append(m)
        log.info("sft.step", **m)
        if on_step:
            on_step(m)
    return history
