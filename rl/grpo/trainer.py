"""GRPO trainer for in-process models: rollout -> group advantages -> one policy update per step,
with checkpoints (model folder + manifest + optimizer state) and resume after an interruption.

The algorithm is exactly the one in `rl/grpo/algorithm.py` (verl's GRPO, token-mean by default or
seq-mean-token-mean with `loss_agg`, PPO clip 0.2, k3 KL 0.001 to a frozen copy of the starting
model, or an adaptive coefficient with `kl_target`). With `constrained_logprobs` (the default) the
behaviour, current and reference log-probs of every token sampled under a constraint (tool-call
grammar, shown references) are taken under that constraint (rl/grpo/logprobs.py): the trainer
trains on the distribution the sampler drew from. Each step samples G rollouts x tasks_per_step
tasks, drawn stratified over task kinds (rl/grpo/batches.py), and makes `mini_batches` optimizer steps
on them, each over a disjoint set of whole groups, as verl does when ppo_mini_batch_size is smaller than
the batch (1: one on-policy step; from the second on, the ratio to the sampling log-probs moves away
from 1 and the PPO clip takes effect), and does so `ppo_epochs` times over the batch (verl's ppo_epochs;
groups reshuffled into new mini-batches each pass; the advantages and the behaviour log-probs stay those
of the rollouts). The behaviour log-probs are taken again by the trainer before the step's first update
(`recompute_behaviour`, as verl recomputes old_log_prob): the sampler's differ from them by float
rounding that depends on which rollouts shared a generation batch, which arrival timing decides, so
updating with them made no two runs alike; with them taken again, and each episode sampling from its
own stream (rl/policies/local.py), two runs update alike, to the bit, as long as their rollouts are
the same (bench/grpo_repeat_bench.py; rounding in the sampler's logits can still flip a rare token,
and from there the runs part). The largest difference is logged per step as `behaviour_gap_max`.
Rollouts come from a `RolloutFn` (the experiment wires it to the
episode runner with simulated customers and sandboxes); each returned `Trace` carries its task id,
group, reward and `excluded` flag. Metrics per step go to `DIR/metrics.jsonl`: the training dynamics
of rl/grpo/dynamics.py, and from the update the KL to the reference, the coefficient it was weighed
with, entropy, clip fraction and the share of forced tokens (one token allowed). With
`keep_rollouts`, every rollout of a step also goes to `DIR/rollouts.jsonl.gz`: the text the model
read and wrote (decoded from its trace) with its step, task, kind, trial, reward and how it ended,
the sampled episodes GRPO learns from, to read when a kind earns no reward.

`drop_uninformative_groups` leaves out the groups whose rollouts all earned the same reward (their
advantage is 0, so their policy gradient is too). By itself it also renormalises: the informative
groups alone are split into mini-batches and averaged, so a step with one informative group moves
the policy as far as a step with eight. With `drop_keeps_scale` every group is split and each
rollout keeps the weight it has in verl's loss over the whole mini-batch, so the drop only saves CPU
(and the dropped rollouts' KL term).

With `anchor_coef` > 0 and anchor conversations (the cold start's SFT data), every optimizer step
also takes `anchor_coef` x the SFT loss (token-mean NLL of the assistant tokens) of `anchor_batch`
of them, drawn afresh for each step: InstructGPT's PPO-ptx, with the cold-start data in place of
pre-training text. GRPO only moves kinds whose sampled rollouts sometimes earn reward; a kind it
samples no success for (haggling, plain address changes at temperature 1) gets no gradient of its
own and drifts with everyone else's, and the anchor holds what the cold start did there. Its
gradient is small wherever the policy still agrees with the cold-start data (an NLL near 0), so it
pulls only where the policy has moved away. Logged per step as `anchor_nll`.

With `guide_failed_groups` and guides (per task id, a conversation of the cold-start teacher that
solved the task with the same customer: rl/experiment/stages.py), a group whose rollouts all earned 0
takes its task's guide as one more member with reward 1, before the advantages are taken: off-policy
guidance as in LUFFY (Yan et al., 2025, "Learning to Reason under Off-Policy Guidance"), only where
GRPO has no signal of its own. The guide gets the positive advantage and the group's sampled
failures a negative one, so a kind whose sampled rollouts never succeed (haggling, plain address
changes at temperature 1) is pulled toward what solves it and away from what the policy did instead;
groups with any success are left as they are. The guide's behaviour log-probs are the policy's own
before the step (`recompute_behaviour`, required), so its importance ratio starts at 1 and the PPO
clip bounds how far a second mini-batch moves it. Its tokens were not sampled, so no constraint
applies to them. Guides are not rollouts: the step's reward and dynamics are the sampled rollouts'
alone, `guided_groups` counts the groups that took one (per kind: `guided_by_category`).
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog
import torch
from pydantic import BaseModel, Field, field_validator, model_validator
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl.grpo.algorithm import (
    KL_ESTIMATORS,
    LOSS_AGG_MODES,
    adapt_kl_coef,
    group_advantages,
    grpo_token_loss,
    loss_weights,
)
from rl.grpo.batches import stratified_sample
from rl.grpo.dynamics import rollout_metrics
from rl.grpo.logprobs import micro_batches, nll_loss, token_logprobs
from rl.grpo.trace import Trace
from rl.models.tiny import load_model_folder, save_model_folder

log = structlog.get_logger(__name__)

# (model, tasks of this step, group size, step) -> traces with reward / excluded / group set
RolloutFn = Callable[[PreTrainedModel, list[Any], int, int], list[Trace]]


class GRPOConfig(BaseModel):
    steps: int = 20
    tasks_per_step: int = 4
    group_size: int = 8
    lr: float = 1e-6
    weight_decay: float = 0.0
    clip: float = 0.2
    kl_coef: float = 0.001  # the KL penalty's coefficient (with `kl_target`: the start and the floor)
    # with a target, the coefficient adapts after every step (rl/grpo/algorithm.py `adapt_kl_coef`)
    kl_target: float | None = Field(default=None, gt=0)
    kl_estimator: str = "k3"  # or "k2" (rl/grpo/algorithm.py)
    # log-probs of tokens sampled under a constraint taken under it (behaviour, current, reference)
    constrained_logprobs: bool = True
    # the behaviour log-probs taken again by the trainer, before the step's first update (verl's
    # recomputed old_log_prob), in place of the sampler's: those carry float rounding that depends on
    # which rollouts shared a generation batch, so with them no two runs update alike (module doc)
    recompute_behaviour: bool = True
    stratify: bool = True  # each step's tasks drawn stratified over their `category:` tags
    # the temperature rollouts are sampled at; every log-prob of the update (behaviour, current,
    # reference) is taken at it, so training sees the distribution the sampler drew from (verl's
    # rollout.temperature; rl/grpo/logprobs.py)
    temperature: float = Field(default=1.0, gt=0)
    grad_clip: float = 1.0
    micro_batch_tokens: int = 8192
    drop_uninformative_groups: bool = False  # skip all-equal groups in the update (saves CPU; not verl)
    # With the drop: split every group into mini-batches and weigh each informative rollout as if the
    # dropped ones were there (verl's scale: a step with few informative groups moves the policy
    # less). Off: the informative groups alone are split and normalised, so a step with one of them
    # takes as large a step as one with eight. Either way the dropped rollouts' KL term is not taken.
    drop_keeps_scale: bool = False
    mini_batches: int = 1  # optimizer steps per rollout batch, over disjoint sets of groups (verl's ppo_mini_batch)
    ppo_epochs: int = Field(default=1, ge=1)  # passes over each rollout batch (verl's ppo_epochs)
    loss_agg: str = "token-mean"  # or "seq-mean-token-mean" (verl's loss_agg_mode; rl/grpo/algorithm.py)
    save_every: int = 1
    keep_checkpoints: int = 2
    keep_rollouts: bool = False  # every rollout's text to rollouts.jsonl.gz (module doc)
    # the SFT loss on the cold-start data beside the GRPO loss (module doc); 0: off
    anchor_coef: float = Field(default=0.0, ge=0.0)
    anchor_batch: int = Field(default=16, ge=1)  # anchor conversations per optimizer step
    # a group whose rollouts all earned 0 takes its task's teacher conversation as one more member
    # with reward 1 (module doc); needs guides and `recompute_behaviour`
    guide_failed_groups: bool = False
    seed: int = 0

    @model_validator(mode="after")
    def _guides_need_recomputed_behaviour(self) -> GRPOConfig:
        if self.guide_failed_groups and not self.recompute_behaviour:
            raise ValueError("guide_failed_groups needs recompute_behaviour: a guide has no sampling log-probs")
        return self

    @field_validator("loss_agg")
    @classmethod
    def _known_agg(cls, v: str) -> str:
        if v not in LOSS_AGG_MODES:
            raise ValueError(f"loss_agg must be one of {LOSS_AGG_MODES}")
        return v

    @field_validator("kl_estimator")
    @classmethod
    def _known_estimator(cls, v: str) -> str:
        if v not in KL_ESTIMATORS:
            raise ValueError(f"kl_estimator must be one of {tuple(KL_ESTIMATORS)}")
        return v


class GRPOTrainer:
    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, tasks: Sequence[Any],
                 rollout: RolloutFn, config: GRPOConfig, out_dir: str | Path,
                 manifest: dict[str, Any] | None = None, task_id: Callable[[Any], str] = str,
                 anchor: Sequence[Trace] = (), guides: Mapping[str, Trace] | None = None) -> None:
        self.model, self.tok, self.tasks, self.rollout, self.cfg = model, tokenizer, list(tasks), rollout, config
        if config.anchor_coef and not anchor:
            raise ValueError("anchor_coef > 0 needs anchor conversations (the cold start's SFT data)")
        if config.guide_failed_groups and not guides:
            raise ValueError("guide_failed_groups needs guides (the teacher's conversations of the tasks)")
        self.anchor = list(anchor)
        self.guides = dict(guides or {})
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.manifest = manifest or {}
        self.task_id = task_id
        self.ref = copy.deepcopy(model).eval().requires_grad_(False)
        self.opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.step = 0
        self.kl_coef = config.kl_coef  # adapts after each step when the config sets a target
        self._resume()

    # ------------------------------------------------------------------ loop
    def run(self, on_step: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        history = []
        while self.step < self.cfg.steps:
            tasks = self.step_tasks(self.step)
            t0 = time.perf_counter()
            traces = self.rollout(self.model, tasks, self.cfg.group_size, self.step)
            rollout_s = time.perf_counter() - t0
            metrics = self.update(traces)
            metrics.update(step=self.step + 1, rollout_seconds=rollout_s, wall=time.time())
            generation = getattr(self.rollout, "last_generation", None)
            if generation:
                metrics["generation"] = dict(generation)
            self.step += 1
            if self.cfg.keep_rollouts:
                self._keep_rollouts(traces)
            with (self.out / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(metrics) + "\n")
            log.info("grpo.step", **{k: v for k, v in metrics.items() if not isinstance(v, dict)})
            history.append(metrics)
            if self.step % self.cfg.save_every == 0 or self.step == self.cfg.steps:
                self.save_checkpoint()
            if on_step is not None:
                on_step(metrics)
        return history

    def _keep_rollouts(self, traces: list[Trace]) -> None:
        # one gzip member per step: appending keeps earlier steps intact, and a reader sees one stream
        with gzip.open(self.out / "rollouts.jsonl.gz", "at") as f:
            for t in traces:
                info = {k: t.info.get(k) for k in ("category", "trial", "turns", "ended_by")}
                f.write(json.dumps({"step": self.step, "task_id": t.task_id, "reward": t.reward,
                                    "excluded": t.excluded, **info,
                                    "text": self.tok.decode(t.input_ids)}) + "\n")

    def step_tasks(self, step: int) -> list[Any]:
        """The tasks step `step` samples (stratified over kinds unless `stratify` is off)."""
        rng = random.Random(self.cfg.seed * 100_003 + step)
        if self.cfg.stratify:
            return stratified_sample(self.tasks, self.cfg.tasks_per_step, rng)
        return rng.sample(self.tasks, min(self.cfg.tasks_per_step, len(self.tasks)))

    def update(self, traces: list[Trace]) -> dict[str, Any]:
        """One policy update on a batch of rollouts; returns the step's metrics."""
        t0 = time.perf_counter()
        metrics = rollout_metrics(traces)
        if self.cfg.guide_failed_groups:
            guides = self._guides_for(traces)
            metrics["guided_groups"] = len(guides)
            metrics["guided_by_category"] = dict(Counter(str(g.info.get("category")) for g in guides))
            traces = [*traces, *guides]
        adv = group_advantages([t.reward for t in traces], [t.group for t in traces], [t.excluded for t in traces])
        valid = [i for i, t in enumerate(traces) if not t.excluded and t.n_generated > 0]
        keep = [i for i in valid if adv[i] != 0.0] if self.cfg.drop_uninformative_groups else valid
        # the rollouts mini-batches and loss weights are made of (module doc: `drop_keeps_scale`)
        scale_from = valid if self.cfg.drop_keeps_scale else keep
        # Mini-batches hold whole groups (verl splits the batch the same way, by prompt).
        groups = sorted({traces[i].group for i in scale_from}, key=str)
        shuffle = random.Random(f"{self.cfg.seed}:{self.step}")
        n_mb = max(1, min(self.cfg.mini_batches, len(groups)))
        sums: Counter = Counter()
        grad_norms: list[float] = []
        processed = 0
        self.model.train()
        olds = self._behaviour(traces, keep, metrics) if self.cfg.recompute_behaviour else {}
        parts = []
        for _ in range(self.cfg.ppo_epochs):
            shuffle.shuffle(groups)
            parts += [set(groups[part::n_mb]) for part in range(n_mb)]
        for mine in parts:
            members = [i for i in scale_from if traces[i].group in mine]
            weight = dict(zip(members, loss_weights([traces[i].n_generated for i in members], self.cfg.loss_agg),
                              strict=True))
            chosen = [i for i in keep if traces[i].group in mine]
            if not chosen:
                continue
            processed += self._update_once([traces[i] for i in chosen], [adv[i] for i in chosen],
                                           [weight[i] for i in chosen], sums,
                                           [olds[i] for i in chosen] if olds else None)
            if self.cfg.anchor_coef:
                self._anchor_once(len(grad_norms), sums)
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)))
            self.opt.step()
        update_rollouts = len(keep)
        n = max(sums["tokens"], 1.0)
        elapsed = time.perf_counter() - t0
        kl = sums["kl"] / n
        metrics.update(kl=kl, kl_coef=self.kl_coef, kl_target=self.cfg.kl_target, entropy=sums["entropy"] / n,
                       clip_frac=sums["clipped"] / n,
                       pg_loss=sums["pg"] / n, grad_norm=max(grad_norms, default=0.0), update_rollouts=update_rollouts,
                       forced_frac=sums["forced"] / n, constrained_frac=sums["constrained"] / n,
                       anchor_nll=sums["anchor_nll"] / max(len(grad_norms), 1) if self.cfg.anchor_coef else None,
                       anchor_tokens=int(sums["anchor_tokens"]),
                       optimizer_steps=len(grad_norms),
                       update_tokens=processed, update_seconds=elapsed,
                       update_tokens_per_s=processed / elapsed if elapsed else 0.0)
        # a step without an update measured no KL, and one whose policy was still the reference
        # (the first, with one mini-batch) measured 0: neither says anything about the coefficient
        if self.cfg.kl_target is not None and grad_norms and kl > 0.0:
            self.kl_coef = adapt_kl_coef(self.kl_coef, kl, self.cfg.kl_target, floor=self.cfg.kl_coef)
        return metrics

    def _guides_for(self, traces: list[Trace]) -> list[Trace]:
        """One guide per group whose valid rollouts all earned 0 and whose task has a guide (module doc)."""
        members: dict[str, list[Trace]] = {}
        for t in traces:
            if not t.excluded and t.n_generated > 0:
                members.setdefault(t.group, []).append(t)
        out = []
        for group, ts in sorted(members.items()):
            guide = self.guides.get(ts[0].task_id)
            if guide is None or any(t.reward != 0.0 for t in ts):
                continue
            out.append(dataclasses.replace(guide, task_id=ts[0].task_id, group=group, reward=1.0, excluded=False,
                                           info={"guide": True, "category": ts[0].info.get("category")}))
        return out

    @torch.no_grad()
    def _behaviour(self, traces: list[Trace], keep: list[int], metrics: dict[str, Any]) -> dict[int, torch.Tensor]:
        """The log-probs of the rollouts in `keep` under the policy before this step's update, taken
        as the update takes them (under the constraint with `constrained_logprobs`, at the
        temperature): per trace index, one value per token. Logs how far the sampler's were from
        them (`behaviour_gap_max`, the largest absolute difference over generated tokens)."""
        held = self.cfg.constrained_logprobs
        out: dict[int, torch.Tensor] = {}
        gap = 0.0
        for mb in micro_batches([traces[i] for i in keep], self.cfg.micro_batch_tokens, self.tok.pad_token_id,
                                constrained=True):
            lp, _ = token_logprobs(self.model, mb, constrained=held, temperature=self.cfg.temperature)
            sampled = mb.old_held if held and mb.old_held is not None else mb.old_logp
            # a guide was not sampled: it has no sampling log-probs to compare
            rows = torch.tensor([not traces[keep[i]].info.get("guide") for i in mb.index], dtype=torch.float32)
            gap = max(gap, float(((lp - sampled).abs() * mb.loss_mask * rows[:, None]).max()))
            for r, i in enumerate(mb.index):
                out[keep[i]] = lp[r, : len(traces[keep[i]])].clone()
        metrics["behaviour_gap_max"] = gap
        return out

    def _update_once(self, batch: list[Trace], advs: list[float], weights: list[float], sums: Counter,
                     olds: list[torch.Tensor] | None = None) -> int:
        """Accumulate the gradient of the GRPO loss over `batch`, each rollout's mask-1 tokens
        weighed by its entry of `weights` (rl/grpo/algorithm.py `loss_weights`); returns the number
        of tokens processed. `olds`: each rollout's behaviour log-probs as `_behaviour` took them
        (None: the sampler's)."""
        self.opt.zero_grad(set_to_none=True)
        processed = 0
        held = self.cfg.constrained_logprobs
        for mb in micro_batches(batch, self.cfg.micro_batch_tokens, self.tok.pad_token_id, constrained=True):
            processed += mb.n_tokens
            with torch.no_grad():
                ref_lp, _ = token_logprobs(self.ref, mb, constrained=held, temperature=self.cfg.temperature)
            lp, ent = token_logprobs(self.model, mb, with_entropy=True, constrained=held,
                                     temperature=self.cfg.temperature)
            # collated with the constraints either way, so that the forced tokens are counted
            old = mb.old_held if held and mb.old_held is not None else mb.old_logp
            if olds is not None:
                old = torch.zeros_like(old)
                for r, i in enumerate(mb.index):
                    old[r, : len(olds[i])] = olds[i]
            a = torch.tensor([advs[i] for i in mb.index], dtype=torch.float32)[:, None].expand_as(lp)
            w = torch.tensor([weights[i] for i in mb.index], dtype=torch.float32)[:, None].expand_as(lp)
            loss, stats = grpo_token_loss(lp, old, ref_lp, a, mb.loss_mask, self.cfg.clip,
                                          self.kl_coef, weights=w, kl_estimator=self.cfg.kl_estimator)
            loss.backward()
            for k, v in stats.items():
                sums[k] += float(v)
            sums["entropy"] += float((ent * mb.loss_mask).sum())
            sums["constrained"] += mb.n_constrained
            sums["forced"] += int(mb.con_forced.sum()) if mb.con_forced is not None else 0
        return processed

    def _anchor_once(self, part: int, sums: Counter) -> None:
        """Add `anchor_coef` x the SFT loss of this optimizer step's anchor conversations to the
        gradient."""
        rng = random.Random(f"anchor:{self.cfg.seed}:{self.step}:{part}")  # the same draw after a resume
        batch = rng.sample(self.anchor, min(self.cfg.anchor_batch, len(self.anchor)))
        nll, _, processed = nll_loss(self.model, batch, self.cfg.micro_batch_tokens, self.tok.pad_token_id,
                                     scale=self.cfg.anchor_coef)
        sums["anchor_nll"] += nll
        sums["anchor_tokens"] += processed

    # ------------------------------------------------------------------ checkpoints
    @property
    def ckpt_dir(self) -> Path:
        return self.out / "checkpoints"

    def save_checkpoint(self) -> Path:
        folder = self.ckpt_dir / f"step_{self.step:05d}"
        manifest = {**self.manifest, "training": {"method": "grpo", "step": self.step, "config": self.cfg.model_dump()}}
        save_model_folder(self.model, self.tok, folder, manifest)
        torch.save({"optimizer": self.opt.state_dict(), "step": self.step, "torch_rng": torch.get_rng_state(),
                    "kl_coef": self.kl_coef}, folder / "trainer_state.pt")
        (self.ckpt_dir / "latest").write_text(folder.name)
        for old in sorted(p for p in self.ckpt_dir.glob("step_*") if p.is_dir())[: -self.cfg.keep_checkpoints]:
            import shutil

            shutil.rmtree(old)
        return folder

    def _resume(self) -> None:
        pointer = self.ckpt_dir / "latest"
        if not pointer.exists():
            return
        folder = self.ckpt_dir / pointer.read_text().strip()
        state_path = folder / "trainer_state.pt"
        if not state_path.exists():
            return
        model, _, _ = load_model_folder(folder)
        self.model.load_state_dict(model.state_dict())
        state = torch.load(state_path, weights_only=False)
        self.opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        self.step = int(state["step"])
        self.kl_coef = float(state.get("kl_coef", self.cfg.kl_coef))
        metrics = self.out / "metrics.jsonl"
        if metrics.exists():  # drop steps logged after the checkpoint
            lines = [ln for ln in metrics.read_text().splitlines() if ln and json.loads(ln)["step"] <= self.step]
            metrics.write_text("".join(ln + "\n" for ln in lines))
        rollouts = self.out / "rollouts.jsonl.gz"
        if rollouts.exists():  # likewise the rollouts of those steps
            with gzip.open(rollouts, "rt") as f:
                kept = [ln for ln in f if json.loads(ln)["step"] <= self.step]
            with gzip.open(rollouts, "wt") as f:
                f.writelines(kept)
        log.info("grpo.resumed", step=self.step, checkpoint=str(folder))
