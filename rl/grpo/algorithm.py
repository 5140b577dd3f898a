"""The GRPO objective, written out: group-normalised advantages, PPO clipping, k3 KL to a frozen
reference, token-mean aggregation.

Variant (verl's `grpo` advantage estimator with `loss_agg_mode=token-mean`, as MUA-RL trains):
- one scalar reward per rollout (0/1 task completion); rollouts of the same task form a group;
  rollouts marked `excluded` (infrastructure or simulator failure) get advantage 0 and do not count
  in their group's mean or std;
- advantage = (r - group mean) / (group sample std (n-1) + 1e-6); a group of one member uses mean 0 and
  std 1 (verl's convention); a group whose rewards are all equal gets 0;
- the advantage is broadcast to every token the agent generated (loss mask 1) and to nothing else;
- PPO clip 0.2: per-token loss max(-A*ratio, -A*clip(ratio, 0.8, 1.2)), ratio = exp(logp - logp_old);
- KL penalty in the loss (not in the reward) with the low-variance k3 estimator:
  d = logp_ref - logp, kl = exp(d) - d - 1, clamped to [-10, 10], coefficient 0.001 (`kl_estimator`
  also offers k2 = d^2 / 2, whose gradient on samples of the policy is that of KL(policy || ref); k3's
  pull back on a token the policy made likelier than the reference is at most 1 x coefficient);
- optionally an adaptive coefficient (`adapt_kl_coef`, the adaptive KL penalty of the PPO paper,
  Schulman et al. 2017, sec. 4): after a step whose KL exceeded 1.5 x the target the coefficient
  doubles, after one below target / 1.5 it halves, but not below a floor (the trainer's: its
  configured coefficient; a run of 18 steps cannot afford the early steps, whose KL is small, to
  halve it to nothing before KL grows) and the trainer skips steps that measured no KL;
- token-mean: the sum over all mask-1 tokens of the batch divided by their count (no per-sequence
  averaging, so long answers are not down-weighted); no entropy bonus.

`loss_weights` also offers verl's `seq-mean-token-mean` (`loss_agg_mode`): each rollout's tokens
are averaged first and rollouts then count equally, so a long failing rollout pushes down no harder
than a short successful one pushes up (within a group the advantages sum to zero, so the push up and
the push down balance). It is an option of the trainer (`GRPOConfig.loss_agg`); token-mean stays
the default, as in MUA-RL.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import torch


def group_advantages(rewards: Sequence[float], groups: Sequence[str], excluded: Sequence[bool] | None = None,
                     eps: float = 1e-6) -> list[float]:
    """One advantage per rollout (see the module docstring for the exact rule)."""
    excluded = excluded or [False] * len(rewards)
    members: dict[str, list[int]] = defaultdict(list)
    for i, (g, ex) in enumerate(zip(groups, excluded, strict=True)):
        if not ex:
            members[g].append(i)
    adv = [0.0] * len(rewards)
    for idx in members.values():
        scores = [float(rewards[i]) for i in idx]
        if len(scores) == 1:
            mean, std = 0.0, 1.0
        else:
            mean = sum(scores) / len(scores)
            std = math.sqrt(sum((s - mean) ** 2 for s in scores) / (len(scores) - 1))
        for i, s in zip(idx, scores, strict=True):
            adv[i] = (s - mean) / (std + eps)
    return adv


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    d = ref_logp - logp
    return (torch.exp(d) - d - 1).clamp(-10.0, 10.0)


def k2_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    d = ref_logp - logp
    return (0.5 * d * d).clamp(max=10.0)


KL_ESTIMATORS = {"k3": k3_kl, "k2": k2_kl}
KL_COEF_RANGE = (1e-4, 10.0)


def adapt_kl_coef(coef: float, kl: float, target: float, floor: float = KL_COEF_RANGE[0]) -> float:
    """The next step's KL coefficient after a step that measured `kl` (PPO's adaptive rule), kept
    within [max(`floor`, KL_COEF_RANGE[0]), KL_COEF_RANGE[1]]."""
    if kl > 1.5 * target:
        coef *= 2.0
    elif kl < target / 1.5:
        coef /= 2.0
    return min(max(coef, floor, KL_COEF_RANGE[0]), KL_COEF_RANGE[1])


def clipped_policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                        clip: float = 0.2) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO loss and a per-token 'was clipped' indicator."""
    ratio = torch.exp(logp - old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip, 1.0 + clip)
    return torch.maximum(unclipped, clipped), (clipped > unclipped).float()


def grpo_token_loss(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor | None,
                    advantages: torch.Tensor, mask: torch.Tensor, clip: float = 0.2,
                    kl_coef: float = 0.001, weights: torch.Tensor | None = None,
                    kl_estimator: str = "k3") -> tuple[
                        torch.Tensor, dict[str, torch.Tensor]]:
    """SUM over mask-1 tokens of the per-token objective, each token times its `weights` entry when
    given (`loss_weights`: 1/batch tokens for the token mean, which the trainer applies across
    micro-batches). Returns the sum and summed (unweighted) statistics."""
    pg, clipped = clipped_policy_loss(logp, old_logp, advantages, clip)
    per_token = pg
    kl = torch.zeros_like(logp)
    if ref_logp is not None and kl_coef:
        kl = KL_ESTIMATORS[kl_estimator](logp, ref_logp)
        per_token = pg + kl_coef * kl
    m = mask.float()
    w = m if weights is None else m * weights
    return (per_token * w).sum(), {"pg": (pg * m).sum().detach(), "kl": (kl * m).sum().detach(),
                                   "clipped": (clipped * m).sum(), "tokens": m.sum()}


LOSS_AGG_MODES = ("token-mean", "seq-mean-token-mean")


def loss_weights(lengths: Sequence[int], mode: str = "token-mean") -> list[float]:
    """The weight of each mask-1 token of each rollout (one value per rollout) such that the loss
    is sum(weight * per-token loss) under aggregation `mode` over these rollouts."""
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"unknown loss aggregation {mode!r}; expected one of {LOSS_AGG_MODES}")
    counted = [n for n in lengths if n > 0]
    if not counted:
        return [0.0] * len(lengths)
    if mode == "token-mean":
        total = sum(counted)
        return [1.0 / total if n > 0 else 0.0 for n in lengths]
    return [1.0 / (n * len(counted)) if n > 0 else 0.0 for n in lengths]


def token_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.float()
    return (values * m).sum() / m.sum().clamp(min=1.0)
