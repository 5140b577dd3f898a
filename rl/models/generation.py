"""Batched generation for local models: one call continues many token prompts at once (left padded),
sampling at a temperature (rollouts: the GRPO recipe's, 1.0 by default) or greedily (evaluation),
and returns for every prompt the new token ids, the log-prob each was sampled with (under the
distribution it was drawn from: softmax(logits / temperature), no top-k/top-p; greedy tokens get the
untempered log-prob) and whether the turn ended with the end-of-turn token. Samples come from one
shared generator or, given one random stream per row, from each row's own (so a row's draws do not
depend on the rest of its batch; its logits still carry the batch's float rounding). Under a constraint
(tool-call grammar, shown references) each token chosen from a masked distribution also records what
the mask allowed, as a packed bit mask (`pack_allowed`), and its log-prob under the masked
distribution, so that training can use the distribution the token was really drawn from
(rl/grpo/logprobs.py).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import PreTrainedModel
from transformers.cache_utils import DynamicCache, DynamicLayer

from rl.chat.call_grammar import CallConstraint


@dataclass
class Generation:
    ids: list[int]
    logprobs: list[float]  # under the unmasked distribution (at the sampling temperature)
    finished: bool  # ended with eos (else cut off at max_new_tokens)
    # index in `ids` -> (what the constraint allowed, packed by `pack_allowed`; the log-prob under the
    # distribution renormalised over it), for the tokens chosen under a constraint that ruled tokens out
    constrained: dict[int, tuple[bytes, float]] = field(default_factory=dict)


def pack_allowed(allowed: torch.Tensor) -> list[bytes]:
    """Rows of a (n, vocab) boolean mask as packed bits (vocab / 8 bytes each)."""
    packed = np.packbits(allowed.cpu().numpy(), axis=-1)
    return [row.tobytes() for row in packed]


def unpack_allowed(masks: list[bytes], width: int) -> torch.Tensor:
    """(len(masks), width) boolean tensor of packed masks (`pack_allowed`)."""
    if not masks:
        return torch.zeros((0, width), dtype=torch.bool)
    bits = np.unpackbits(np.frombuffer(b"".join(masks), dtype=np.uint8).reshape(len(masks), -1), axis=-1)
    return torch.from_numpy(bits[:, :width].astype(bool))


def generate_batch(model: PreTrainedModel, prompts: list[list[int]], *, max_new_tokens: int, eos_id: int,
                   pad_id: int, temperature: float = 1.0, greedy: bool = False,
                   generator: torch.Generator | None = None) -> list[Generation]:
    """Continue every prompt until eos or `max_new_tokens`; KV-cached, one forward per new token
    (`generate_continuing` with nothing cached yet)."""
    gens, _ = generate_continuing(model, prompts, [None] * len(prompts), max_new_tokens=max_new_tokens,
                                  eos_id=eos_id, pad_id=pad_id, temperature=temperature, greedy=greedy,
                                  generator=generator, return_caches=False)
    return gens


@dataclass
class PrefixCache:
    """The key/value cache of the first `length` tokens of one conversation (one (kv_heads, length,
    head_dim) key and value tensor per layer). Valid as long as the conversation only grows by appending."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]

    @property
    def length(self) -> int:
        return int(self.layers[0][0].shape[1]) if self.layers else 0


class ReservedLayer(DynamicLayer):
    """A `DynamicLayer` whose keys and values live in a buffer with room for `headroom` more tokens:
    a decoding step writes its token in place instead of concatenating (which copies the whole
    cache every step). `keys` / `values` are views of the filled part, as a `DynamicLayer`'s would be."""

    def __init__(self, headroom: int) -> None:
        super().__init__()
        self.headroom = max(1, headroom)
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None
        self._n = 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object,
               **kwargs: object) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        if self._k is None or self._v is None or self._n + n > self._k.shape[-2]:
            size = self._n + n + self.headroom
            k = key_states.new_empty((*key_states.shape[:-2], size, key_states.shape[-1]))
            v = value_states.new_empty((*value_states.shape[:-2], size, value_states.shape[-1]))
            if self._k is not None and self._v is not None and self._n:
                k[..., : self._n, :] = self._k[..., : self._n, :]
                v[..., : self._n, :] = self._v[..., : self._n, :]
            self._k, self._v = k, v
        self._k[..., self._n: self._n + n, :] = key_states
        self._v[..., self._n: self._n + n, :] = value_states
        self._n += n
        self.keys, self.values = self._k[..., : self._n, :], self._v[..., : self._n, :]
        return self.keys, self.values

    def keep(self, rows: torch.Tensor, drop_columns: int = 0) -> None:
        """Keep only the batch rows `rows` (in that order) and the cached tokens after the first
        `drop_columns` (columns every kept row masks out), with the headroom that was left."""
        if self._k is None or self._v is None:
            return
        self._k = self._k.index_select(0, rows)[..., drop_columns:, :]
        self._v = self._v.index_select(0, rows)[..., drop_columns:, :]
        self._n -= drop_columns
        self.keys, self.values = self._k[..., : self._n, :], self._v[..., : self._n, :]


def reserved_cache(num_layers: int, headroom: int) -> DynamicCache:
    """A `DynamicCache` of `ReservedLayer`s (`headroom`: the tokens a generation will add)."""
    cache = DynamicCache()
    cache.layers = [ReservedLayer(headroom) for _ in range(num_layers)]
    cache.layer_class_to_replicate = None
    return cache


@torch.no_grad()
def generate_continuing(model: PreTrainedModel, prompts: list[list[int]], caches: list[PrefixCache | None], *,
                        max_new_tokens: int, eos_id: int, pad_id: int, temperature: float = 1.0,
                        greedy: bool = False, generator: torch.Generator | None = None,
                        return_caches: bool = True, constraint: CallConstraint | None = None,
                        call_overrun: int = 0, compact: bool = True,
                        streams: Sequence[random.Random] | None = None) -> tuple[list[Generation], list[PrefixCache]]:
    """`generate_batch` for conversations that were continued before: row i's cache holds the first
    tokens of `prompts[i]`, so only the rest (the new customer message or tool results and the
    generation prompt) is processed. Cached rows are left padded to a common length, the new parts
    likewise after them; padding is masked out (holes in the attention mask) and every token keeps
    its true position. Returns the generations and each row's cache of everything it processed
    (an empty list when `return_caches` is False). With a `constraint`, rows inside a tool call
    choose only tokens its grammar allows; their `logprobs` stay those of the unmasked distribution,
    and `constrained` records each such token's allowed set and its log-prob under the masked one
    (identical sets share one bytes object across the batch); a row still inside a call when
    `max_new_tokens` run out goes on for up to `call_overrun` more tokens to close it (the grammar
    bounds a call's length), so that the budget never cuts a call the model chose to write into a
    malformed one. With `compact`, rows that have finished leave the decoding batch (and cached
    columns no remaining row attends to leave the cache) once they are a quarter of it: a decoding
    step reads every cached row's keys and values, and most turns end long before the batch's
    longest; the tokens are those of a batch that keeps them (tests/rl/models/test_generation.py).
    With `streams` (one random stream per row), row i's samples are drawn from `streams[i]` alone, one
    uniform per token it generates, instead of from `generator`: a row's draws then do not depend on
    which other rows share its batch or in which order (its logits can still differ in the last
    bits with the batch's padding and size, which flips a token only when a draw falls that close
    to the edge between two)."""
    n = len(prompts)
    if streams is not None and len(streams) != n:
        raise ValueError(f"{len(streams)} random streams for {n} prompts")
    if not n:
        return [], []
    if not greedy and temperature <= 0:
        raise ValueError(f"sampling temperature must be > 0, got {temperature}")
    scale = 1.0 if greedy else temperature  # the logits' divisor of every log-prob recorded
    device = next(model.parameters()).device
    cached = []
    for p, c in zip(prompts, caches, strict=True):
        k = c.length if c is not None else 0
        cached.append(k if 0 < k < len(p) else 0)  # a cache that does not leave a token to process is dropped
    suffixes = [p[k:] for p, k in zip(prompts, cached, strict=True)]
    lc, ls = max(cached), max(len(s) for s in suffixes)
    attention = torch.zeros((n, lc + ls), dtype=torch.long)
    input_ids = torch.full((n, ls), pad_id, dtype=torch.long)
    positions = torch.zeros((n, ls), dtype=torch.long)
    for i, (s, k) in enumerate(zip(suffixes, cached, strict=True)):
        attention[i, lc - k: lc] = 1
        attention[i, lc + ls - len(s):] = 1
        input_ids[i, ls - len(s):] = torch.tensor(s, dtype=torch.long)
        positions[i, ls - len(s):] = torch.arange(k, k + len(s))
    # room for what this call adds: the new part of each prompt (when a cached prefix comes first) and the generation
    overrun = call_overrun if constraint is not None else 0
    cache = reserved_cache(model.config.num_hidden_layers, headroom=max_new_tokens + overrun + (ls if lc else 0))
    if lc:
        data = []
        ref = next(c for c, k in zip(caches, cached, strict=True) if k)
        for layer in range(len(ref.layers)):
            kv = []
            for which in (0, 1):
                proto = ref.layers[layer][which]
                t = torch.zeros((n, proto.shape[0], lc, proto.shape[2]), dtype=proto.dtype)
                for i, (c, k) in enumerate(zip(caches, cached, strict=True)):
                    if k:
                        t[i, :, lc - k:] = c.layers[layer][which]
                kv.append(t.to(device))
            data.append(tuple(kv))
        for layer, (k, v) in zip(cache.layers, data, strict=True):
            layer.update(k, v)
    attention, input_ids, positions = attention.to(device), input_ids.to(device), positions.to(device)
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, cache=cache, use_cache=True,
                logits_to_keep=1)
    cache = out.cache
    logits = out.logits[:, -1, :].clone()  # every row's; a row that left the batch keeps its last (unused)
    next_pos = positions[:, -1] + 1
    live = torch.arange(n, device=device)  # the rows still in the cache, in its order
    offset = 0  # attention columns dropped from the front of the cache
    left: dict[int, PrefixCache] = {}  # the caches of rows that left the batch
    new_ids: list[list[int]] = [[] for _ in range(n)]
    new_lp: list[list[float]] = [[] for _ in range(n)]
    alive = torch.ones(n, dtype=torch.bool, device=device)
    finished = [False] * n
    new_con: list[dict[int, tuple[bytes, float]]] = [{} for _ in range(n)]
    interned: dict[bytes, bytes] = {}
    limit = max_new_tokens + overrun
    for step in range(limit):
        masked = constraint.mask_logits(logits) if constraint is not None else None
        uniforms = None
        if streams is not None and not greedy:  # one draw per row still generating; finished rows draw none
            uniforms = torch.tensor([streams[i].random() if a else 0.0 for i, a in enumerate(alive.tolist())],
                                    dtype=torch.float64)
        tok, tok_lp = _sample(logits, greedy=greedy, temperature=scale, generator=generator,
                              choose_from=masked, uniforms=uniforms)
        held: dict[int, tuple[bytes, float]] = {}
        if constraint is not None and masked is not None and constraint.masked:
            rows = [i for i in constraint.masked if bool(alive[i])]
            if rows:
                sel = masked[rows].float()
                if scale != 1.0:
                    sel = sel / scale
                m_lp = torch.log_softmax(sel, dim=-1).gather(-1, tok[rows][:, None]).squeeze(-1).tolist()
                for i, packed, lp in zip(rows, pack_allowed(torch.isfinite(sel)), m_lp, strict=True):
                    held[i] = (interned.setdefault(packed, packed), float(lp))
        for i in alive.nonzero().flatten().tolist():
            t = int(tok[i])
            if constraint is not None:
                constraint.update(i, t)
            if i in held:
                new_con[i][len(new_ids[i])] = held[i]
            new_ids[i].append(t)
            new_lp[i].append(float(tok_lp[i]))
            if t == eos_id:
                finished[i] = True
        was_alive = alive
        alive = alive & (tok != eos_id)
        if step >= max_new_tokens - 1 and constraint is not None:  # the budget is spent: only open calls go on
            alive = alive & torch.tensor([s is not None for s in constraint.states], device=alive.device)
        if not bool(alive.any()) or step == limit - 1:
            break
        # feed what was sampled; rows that had already finished feed masked padding
        tok = torch.where(was_alive, tok, torch.full_like(tok, pad_id))
        needed = was_alive[live]
        if compact and int(needed.sum()) <= 3 * len(live) // 4:
            # the rows that finished before this step (their last token is cached) leave
            going, staying = (~needed).nonzero().flatten(), needed.nonzero().flatten()
            if return_caches:
                for pos, row in zip(going.tolist(), live[going].tolist(), strict=True):
                    left[row] = _row_cache(cache, pos, attention[row, offset:])
            live = live[staying]
            first = int(attention[live, offset:].any(0).int().argmax())  # the first column a staying row attends to
            for layer in cache.layers:
                assert isinstance(layer, ReservedLayer)
                layer.keep(staying, first)
            offset += first
        attention = torch.cat([attention, was_alive.long()[:, None]], dim=-1)
        out = model(input_ids=tok[live][:, None], attention_mask=attention[live, offset:],
                    position_ids=next_pos[live][:, None], cache=cache, use_cache=True)
        cache = out.cache
        logits[live] = out.logits[:, -1, :]
        next_pos = next_pos + was_alive.long()
    gens = [Generation(ids=new_ids[i], logprobs=new_lp[i], finished=finished[i], constrained=new_con[i])
            for i in range(n)]
    if not return_caches:
        return gens, []
    at = {row: pos for pos, row in enumerate(live.tolist())}
    prefix = [left[i] if i in left else _row_cache(cache, at[i], attention[i, offset:]) for i in range(n)]
    return gens, prefix


def _row_cache(cache: DynamicCache, pos: int, attended: torch.Tensor) -> PrefixCache:
    """The cache of the batch's row `pos` without its padding (`attended`: its row of the attention
    mask over the cached columns)."""
    idx = attended.bool().nonzero().flatten()
    return PrefixCache([(layer.keys[pos][:, idx].cpu(), layer.values[pos][:, idx].cpu()) for layer in cache.layers])


def _sample(logits: torch.Tensor, *, greedy: bool, temperature: float, generator: torch.Generator | None,
            choose_from: torch.Tensor | None = None,
            uniforms: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The next token of each row (argmax, or a sample at `temperature`, of `choose_from`: the
    logits with disallowed tokens at -inf, by default `logits`) and its log-prob under the unmasked
    distribution it was sampled from, softmax(logits / temperature) (untempered when greedy; the
    constrained one is computed by the caller; `temperature` > 0, checked by the caller). With
    `uniforms` (one per row, in [0, 1)), row i takes the token where its cumulative probability
    first exceeds `uniforms[i]` (inverse-CDF sampling: the same distribution as `torch.multinomial`,
    from a draw that belongs to the row)."""
    scaled = logits.float() if greedy or temperature == 1.0 else logits.float() / temperature
    logp = torch.log_softmax(scaled, dim=-1)
    pick = logits if choose_from is None else choose_from
    if greedy:
        tok = pick.float().argmax(-1)
    else:
        probs = torch.softmax(pick.float() / temperature, dim=-1)
        if uniforms is None:
            tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        else:
            tok = _inverse_cdf(probs, uniforms)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


def _inverse_cdf(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Per row, the first token whose cumulative probability exceeds `uniforms[row]` times the row's
    total (a token of probability 0 never qualifies: the sum does not grow there). The target is
    kept just under the total, which the row's last token with probability reaches, so that
    rounding in the product cannot carry a draw past it."""
    cdf = probs.double().cumsum(-1)
    total = cdf[:, -1]
    target = torch.minimum(uniforms.to(cdf.device) * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, target.unsqueeze(-1), right=True).squeeze(-1)
