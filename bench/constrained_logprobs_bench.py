"""Constrained against unconstrained log-probs in GRPO, side by side. From one model, with the same
task draws and rollout seeds, a few GRPO steps with `constrained_logprobs` on and then off; per step
the rollout and update seconds, the KL to the reference, the share of generated tokens the
constraint ruled tokens out for and the share it forced (one token allowed), and the share of the
policy-gradient signal that falls on forced tokens (|advantage| x the norm of the gradient of the
token's log-prob at the logits, |e_t - p|: 0 under the constraint). At the end, on the first step's
constrained tokens, the probability mass each trained policy puts on tokens the constraint forbade.

    PYTHONPATH=. nice -n 19 python bench/constrained_logprobs_bench.py --model MODEL_DIR --tasks RL_TASKS.json

MODEL_DIR is a cold-start model folder (its manifest names its view) and RL_TASKS.json a task file
of one store (an online cycle writes both: `.../train/models/cold_start`, `.../tasks/rl.json`).
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from pathlib import Path

import torch

from rl.grpo.algorithm import group_advantages
from rl.grpo.logprobs import micro_batches, token_logprobs
from rl.grpo.trace import Trace
from rl.models.generation import unpack_allowed


@torch.no_grad()
def signal_on_forced(model: torch.nn.Module, traces: list[Trace], pad_id: int, constrained: bool) -> float:
    """The share of sum |A| |e_t - p| over generated tokens that falls on forced tokens, p the
    distribution the trainer's objective uses (renormalised over what was allowed, or not)."""
    adv = group_advantages([t.reward for t in traces], [t.group for t in traces], [t.excluded for t in traces])
    kept = [i for i, t in enumerate(traces) if adv[i] != 0.0 and not t.excluded]
    if not kept:
        return 0.0
    forced_sum = total = 0.0
    for mb in micro_batches([traces[i] for i in kept], 8192, pad_id, constrained=True):
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention, use_cache=False).logits.float()
        a = torch.tensor([abs(adv[kept[i]]) for i in mb.index])
        rows, pos = mb.loss_mask.nonzero(as_tuple=True)
        p = torch.softmax(logits[rows, pos - 1], dim=-1)
        forced = torch.zeros(len(rows), dtype=torch.bool)
        if mb.n_constrained:
            assert mb.con_rows is not None and mb.con_pos is not None and mb.con_mask is not None and mb.masks
            where = {(int(r), int(t)): k for k, (r, t) in enumerate(zip(mb.con_rows, mb.con_pos, strict=True))}
            index = [where.get((int(r), int(t)), -1) for r, t in zip(rows, pos, strict=True)]
            held = torch.tensor([k >= 0 for k in index])
            which = torch.tensor([k for k in index if k >= 0], dtype=torch.long)
            forced[held] = mb.con_forced[which]
            if constrained:
                allowed = unpack_allowed(mb.masks, p.shape[-1])[mb.con_mask[which]]
                q = p[held] * allowed
                p[held] = q / q.sum(-1, keepdim=True)
        target = mb.input_ids[rows, pos]
        onehot = torch.nn.functional.one_hot(target, p.shape[-1]).float()
        norm = (onehot - p).norm(dim=-1) * a[rows]
        forced_sum += float(norm[forced].sum())
        total += float(norm.sum())
    return forced_sum / total if total else 0.0


def update_cost(model: torch.nn.Module, traces: list[Trace], pad_id: int, reps: int = 3) -> dict[str, float]:
    """Seconds of one forward and backward of the policy's log-probs over `traces`, with and
    without the renormalisation (interleaved, best of `reps`: the machine is shared)."""
    best = {"constrained": float("inf"), "unconstrained": float("inf")}
    batches = list(micro_batches(traces, 8192, pad_id, constrained=True))
    for _ in range(reps):
        for held in (True, False):
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            for mb in batches:
                lp, _ = token_logprobs(model, mb, with_entropy=True, constrained=held)
                (lp * mb.loss_mask).sum().backward()
            key = "constrained" if held else "unconstrained"
            best[key] = min(best[key], time.perf_counter() - t0)
    model.zero_grad(set_to_none=True)
    return best


@torch.no_grad()
def forbidden_mass(model: torch.nn.Module, traces: list[Trace], pad_id: int) -> float:
    """Mean probability, over the constrained tokens of `traces`, of the tokens their constraint
    forbade, under `model`'s unmasked distribution."""
    masses = []
    for mb in micro_batches(traces, 8192, pad_id, constrained=True):
        if not mb.n_constrained:
            continue
        assert mb.con_rows is not None and mb.con_pos is not None and mb.con_mask is not None and mb.masks
        logits = model(input_ids=mb.input_ids, attention_mask=mb.attention, use_cache=False).logits.float()
        p = torch.softmax(logits[mb.con_rows, mb.con_pos - 1], dim=-1)
        allowed = unpack_allowed(mb.masks, p.shape[-1])[mb.con_mask]
        masses.append(1.0 - (p * allowed).sum(-1))
    return float(torch.cat(masses).mean()) if masses else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--tasks", type=Path, required=True)
    ap.add_argument("--recipe", default="first-model")
    ap.add_argument("--steps", type=int, default=2, help="GRPO steps per run (the first on shared rollouts)")
    ap.add_argument("--tasks-per-step", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--lr", type=float, default=None, help="default: the recipe's")
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    from rl.chat.views import ChatView
    from rl.env.episode import EpisodeLimits
    from rl.experiment.environment import ExperimentEnv
    from rl.experiment.recipe import get_recipe
    from rl.grpo.rollout import EpisodeRollout
    from rl.grpo.trainer import GRPOTrainer
    from rl.models.tiny import load_model_folder
    from rl.simulator.base import make_user
    from rl.tasks.schema import load_tasks
    from rl.tasks.stores import resolve_store

    torch.set_num_threads(2)
    r = get_recipe(a.recipe)
    tasks = load_tasks(a.tasks)
    start, tok, manifest = load_model_folder(a.model)
    view = ChatView.from_manifest(manifest.get("view"))
    ref = tasks[0].snapshot
    results: dict[str, dict] = {}
    with ExperimentEnv(a.database_url, resolve_store(ref), ref, 8) as env:
        episodes = EpisodeRollout(tok, env.loop, env.pool, env.cache, make_user("scripted"),
                                  max_new_tokens=r.max_new_tokens, max_context=r.max_context, view=view,
                                  limits=EpisodeLimits(max_turns=r.max_turns), concurrency=16)
        base = r.grpo.model_copy(update={"steps": a.steps, "tasks_per_step": a.tasks_per_step,
                                         "group_size": a.group_size, "save_every": 10_000,
                                         **({"lr": a.lr} if a.lr else {})})
        # the first step's rollouts, shared by both runs (both start from the same model)
        probe = GRPOTrainer(start, tok, tasks, episodes, base, tempfile.mkdtemp())
        first = episodes(start, probe.step_tasks(0), base.group_size, 0)
        for held in (True, False):
            model = copy.deepcopy(start)
            shares: list[float] = []

            def rollout(m, step_tasks, g, step, held=held, shares=shares):
                traces = first if step == 0 else episodes(m, step_tasks, g, step)
                shares.append(signal_on_forced(m, traces, tok.pad_token_id, constrained=held))
                return traces

            cfg = base.model_copy(update={"constrained_logprobs": held})
            t0 = time.perf_counter()
            history = GRPOTrainer(model, tok, tasks, rollout, cfg, tempfile.mkdtemp()).run()
            results["constrained" if held else "unconstrained"] = {
                "seconds": time.perf_counter() - t0,
                "steps": [{"step": m["step"], "reward": m["reward_mean"], "informative": m["informative_groups"],
                           "opt_steps": m["optimizer_steps"], "rollout_s": m["rollout_seconds"],
                           "update_s": m["update_seconds"], "update_tok_s": m["update_tokens_per_s"], "kl": m["kl"],
                           "entropy": m["entropy"], "clip_frac": m["clip_frac"],
                           "constrained_frac": m["constrained_frac"], "forced_frac": m["forced_frac"],
                           "pg_signal_on_forced": s} for m, s in zip(history, shares, strict=True)],
                "forbidden_mass_after": forbidden_mass(model, first, tok.pad_token_id)}
    results["forbidden_mass_start"] = forbidden_mass(start, first, tok.pad_token_id)
    results["logprob_pass_seconds"] = update_cost(start, first, tok.pad_token_id)
    if a.json:
        print(json.dumps(results))
        return
    print(f"forbidden mass on step 1's constrained tokens: start {results['forbidden_mass_start']:.4f}")
    cost = results["logprob_pass_seconds"]
    print(f"policy log-prob forward+backward on step 1's rollouts: constrained {cost['constrained']:.2f} s, "
          f"unconstrained {cost['unconstrained']:.2f} s")
    for mode in ("constrained", "unconstrained"):
        res = results[mode]
        print(f"{mode}: {res['seconds']:.0f} s, forbidden mass after {res['forbidden_mass_after']:.4f}")
        for s in res["steps"]:
            print("  " + "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in s.items()))


if __name__ == "__main__":
    main()
