"""Per-token log-probs and entropies of traces under a model, in length-sorted micro-batches.

Traces are right-padded into a micro-batch of at most `max_tokens` padded tokens; the value at
position t is the log-prob of token t given tokens < t (position 0 has none and gets 0). Used for the
reference model, the policy update and SFT, so all three see exactly the same tensors.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from rl.grpo.trace import Trace


@dataclass
class MicroBatch:
    index: list[int]  # positions of these traces in the caller's list
    input_ids: torch.Tensor  # (b, T) right padded
    attention: torch.Tensor  # (b, T)
    loss_mask: torch.Tensor  # (b, T) mask of the token AT t (0 on padding)
    old_logp: torch.Tensor  # (b, T) sampling log-probs

    @property
    def n_tokens(self) -> int:
        return int(self.attention.sum())


def micro_batches(traces: Sequence[Trace], max_tokens: int, pad_id: int) -> Iterator[MicroBatch]:
    order = sorted(range(len(traces)), key=lambda i: len(traces[i]))
    chunk: list[int] = []
    for i in order:
        width = len(traces[i])
        if chunk and width * (len(chunk) + 1) > max_tokens:
            yield _collate([traces[j] for j in chunk], chunk, pad_id)
            chunk = []
        chunk.append(i)
    if chunk:
        yield _collate([traces[j] for j in chunk], chunk, pad_id)


def _collate(traces: list[Trace], index: list[int], pad_id: int) -> MicroBatch:
    width = max(len(t) for t in traces)
    n = len(traces)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    att = torch.zeros((n, width), dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.float32)
    old = torch.zeros((n, width), dtype=torch.float32)
    for r, t in enumerate(traces):
        k = len(t)
        ids[r, :k] = torch.tensor(t.input_ids)
        att[r, :k] = 1
        mask[r, :k] = torch.tensor(t.loss_mask, dtype=torch.float32)
        old[r, :k] = torch.tensor(t.logprobs, dtype=torch.float32)
    mask[:, 0] = 0.0  # nothing predicts the first token
    return MicroBatch(index, ids, att, mask, old)


def token_logprobs(model: PreTrainedModel, mb: MicroBatch, with_entropy: bool = False) -> tuple[
        torch.Tensor, torch.Tensor | None]:
    """(b, T) log-prob of each token given its prefix (0 at t=0), and optionally the entropy of the
    predicting distribution at each position."""
    logits = model(input_ids=mb.input_ids, attention_mask=mb.attention, use_cache=False).logits[:, :-1].float()
    logp_all = torch.log_softmax(logits, dim=-1)
    target = mb.input_ids[:, 1:]
    lp = logp_all.gather(-1, target[..., None]).squeeze(-1)
    lp = torch.nn.functional.pad(lp, (1, 0))
    ent = None
    if with_entropy:
        with torch.no_grad():
            ent = -(logp_all.exp() * logp_all).sum(-1)
            ent = torch.nn.functional.pad(ent, (1, 0))
    return lp, ent
