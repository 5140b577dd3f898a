"""Per-token log-probs and entropies of traces under a model, in length-sorted micro-batches.

Traces are right-padded into a micro-batch of at most `max_tokens` padded tokens; the value at
position t is the log-prob of token t given tokens < t (position 0 has none and gets 0). Used for the
reference model, the policy update and SFT, so all three see exactly the same tensors. `nll_loss` is
SFT's loss, also GRPO's anchor to the cold-start data (rl/grpo/trainer.py).

With `constrained`, a token that was sampled under a constraint (the trace records what it allowed:
`Trace.constrained`) gets its log-prob under the distribution renormalised over the allowed tokens,
logit(t) - logsumexp_{a in allowed} logit(a), for the current policy and the reference alike, and its
sampling log-prob is the one recorded under the constraint: training then sees the distribution the
sampler drew from. A forced token (one allowed) has log-prob 0 and no gradient; a negative advantage
lowers a token's share among the allowed ones, never raising forbidden tokens. The renormalisation
costs (constrained tokens x vocabulary) floats on top of the logits, only where a constraint applied.

With a `temperature` other than 1 (GRPO rollouts sampled at that temperature) every log-prob and
entropy is that of softmax(logits / temperature), the distribution the sampler drew from, for the
current policy and the reference alike (verl's actor divides its logits the same way).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from transformers import PreTrainedModel

from rl.grpo.trace import Trace
from rl.models.generation import unpack_allowed


@dataclass
class MicroBatch:
    index: list[int]  # positions of these traces in the caller's list
    input_ids: torch.Tensor  # (b, T) right padded
    attention: torch.Tensor  # (b, T)
    loss_mask: torch.Tensor  # (b, T) mask of the token AT t (0 on padding)
    old_logp: torch.Tensor  # (b, T) sampling log-probs (unmasked)
    # with `constrained`: the sampling log-probs under the constraints, the N constrained positions
    # (row, t), which of `masks` allowed each, and whether it allowed a single token (forced)
    old_held: torch.Tensor | None = None  # (b, T)
    con_rows: torch.Tensor | None = None  # (N,) long
    con_pos: torch.Tensor | None = None  # (N,) long
    con_mask: torch.Tensor | None = None  # (N,) long index into `masks`
    con_forced: torch.Tensor | None = None  # (N,) bool
    masks: list[bytes] | None = None  # packed allowed sets (rl/models/generation.py `pack_allowed`)

    @property
    def n_tokens(self) -> int:
        return int(self.attention.sum())

    @property
    def n_constrained(self) -> int:
        return 0 if self.con_rows is None else int(self.con_rows.numel())


def micro_batches(traces: Sequence[Trace], max_tokens: int, pad_id: int,
                  constrained: bool = False) -> Iterator[MicroBatch]:
    order = sorted(range(len(traces)), key=lambda i: len(traces[i]))
    chunk: list[int] = []
    for i in order:
        width = len(traces[i])
        if chunk and width * (len(chunk) + 1) > max_tokens:
            yield _collate([traces[j] for j in chunk], chunk, pad_id, constrained)
            chunk = []
        chunk.append(i)
    if chunk:
        yield _collate([traces[j] for j in chunk], chunk, pad_id, constrained)


def _collate(traces: list[Trace], index: list[int], pad_id: int, constrained: bool = False) -> MicroBatch:
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
    mb = MicroBatch(index, ids, att, mask, old)
    if constrained:
        _add_constraints(mb, traces)
    return mb


def _add_constraints(mb: MicroBatch, traces: list[Trace]) -> None:
    """The constrained positions of `traces` (masks shared between traces are stored once)."""
    masks: dict[bytes, int] = {}
    rows, pos, which = [], [], []
    mb.old_held = mb.old_logp.clone()
    for r, t in enumerate(traces):
        mb.old_held[r, : len(t)] = torch.tensor(t.behaviour_logprobs(True), dtype=torch.float32)
        for p, (k, _) in t.constrained.items():
            if p == 0 or not t.loss_mask[p]:
                continue
            allowed = t.masks[k]
            rows.append(r)
            pos.append(p)
            which.append(masks.setdefault(allowed, len(masks)))
    packed = list(masks)
    ones = [int(np.unpackbits(np.frombuffer(m, dtype=np.uint8)).sum()) for m in packed]
    mb.con_rows, mb.con_pos = torch.tensor(rows, dtype=torch.long), torch.tensor(pos, dtype=torch.long)
    mb.con_mask = torch.tensor(which, dtype=torch.long)
    mb.con_forced = torch.tensor([ones[w] == 1 for w in which], dtype=torch.bool)
    mb.masks = packed


def token_logprobs(model: PreTrainedModel, mb: MicroBatch, with_entropy: bool = False,
                   constrained: bool = False, temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(b, T) log-prob of each token given its prefix (0 at t=0), and optionally the entropy of the
    predicting distribution at each position; with `constrained` (and a micro-batch collated with
    it), both under the distribution renormalised over what each constrained position allowed; both
    at `temperature` (the logits divided by it)."""
    logits = model(input_ids=mb.input_ids, attention_mask=mb.attention, use_cache=False).logits[:, :-1].float()
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    target = mb.input_ids[:, 1:]
    lp = logp_all.gather(-1, target[..., None]).squeeze(-1)
    ent = None
    if with_entropy:
        with torch.no_grad():
            ent = -(logp_all.exp() * logp_all).sum(-1)
    if constrained and mb.n_constrained:
        assert mb.con_rows is not None and mb.con_pos is not None and mb.con_mask is not None and mb.masks
        rows, at = mb.con_rows.to(lp.device), mb.con_pos.to(lp.device) - 1  # logits at t-1 predict token t
        allowed = unpack_allowed(mb.masks, logp_all.shape[-1]).to(lp.device)[mb.con_mask.to(lp.device)]
        # from the logits, not the log-softmax: then no gradient reaches a forbidden logit, not even
        # the float rounding of the full normaliser's
        held = logits[rows, at].masked_fill(~allowed, float("-inf"))
        norm = torch.logsumexp(held, dim=-1)
        picked = held.gather(-1, target[rows, at][:, None]).squeeze(-1)
        lp = lp.index_put((rows, at), picked - norm)
        if ent is not None:
            with torch.no_grad():
                renorm = held - norm[:, None]
                ent = ent.index_put((rows, at), -torch.where(allowed, renorm.exp() * renorm, 0.0).sum(-1))
    lp = torch.nn.functional.pad(lp, (1, 0))
    if ent is not None:
        ent = torch.nn.functional.pad(ent, (1, 0))
    return lp, ent


def nll_loss(model: PreTrainedModel, traces: list[Trace], micro_batch_tokens: int, pad_id: int,
             backward: bool = True, scale: float = 1.0) -> tuple[float, int, int]:
    """Token-mean NLL over the assistant tokens of `traces`, with gradients of `scale` x it
    accumulated when `backward`. Returns (the unscaled loss, assistant tokens, all tokens processed)."""
    total = sum(t.n_generated for t in traces)
    loss_sum, processed = 0.0, 0
    for mb in micro_batches(traces, micro_batch_tokens, pad_id):
        with torch.set_grad_enabled(backward):
            lp, _ = token_logprobs(model, mb)
            loss = -(lp * mb.loss_mask).sum() / max(total, 1)
            if backward:
                (loss * scale).backward()
        loss_sum += float(loss.detach())
        processed += mb.n_tokens
    return loss_sum, total, processed
