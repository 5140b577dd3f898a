"""Does a GRPO run repeat? The same GRPO steps from one model, with the same task draws and seeds,
run twice in each of two ways: with lockstep batching (rl/policies/local.py: a batch waits for
every running episode's turn and holds them in key order, and episodes are admitted in task order,
so the episodes decide each batch), as the trainer runs by default; and with batches of whoever
arrived during the last generation, as before (timing decides them). Both sample each episode
from its own stream and take the behaviour log-probs again before the update. Per way and step:
each run's sampled reward, share of all-wrong groups and KL to the reference, and whether the two
runs' rollouts are token for token the same; at the end, the largest weight difference between
the two runs and each run's seconds (side by side: lockstep's cost).

    PYTHONPATH=. nice -n 19 python bench/grpo_repeat_bench.py --model MODEL_DIR --tasks RL_TASKS.json

MODEL_DIR is a cold-start model folder (its manifest names its view) and RL_TASKS.json a task file
of one store (a paper-table run writes both: `DIR/models/cold_start`, `DIR/tasks/rl.json`).
Sessions before this one compared two concurrencies instead (bench/results/README.md).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import tempfile
import time
from pathlib import Path

import torch

from rl.grpo.trace import Trace


def traces_digest(traces: list[Trace]) -> str:
    """One digest of a step's rollouts: every trace's tokens and reward, in (task, trial) order."""
    h = hashlib.sha256()
    for t in sorted(traces, key=lambda t: (t.task_id, t.info.get("trial", 0))):
        h.update(f"{t.task_id}:{t.info.get('trial')}:{t.reward}:".encode())
        h.update(json.dumps(t.input_ids).encode())
    return h.hexdigest()[:16]


@torch.no_grad()
def max_weight_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a.parameters(), b.parameters(), strict=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--tasks", type=Path, required=True)
    ap.add_argument("--recipe", default="cpu-tiny")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=None, help="rollout concurrency (default: the recipe's)")
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
    concurrency = a.concurrency or r.rollout_concurrency
    tasks = load_tasks(a.tasks)
    start, tok, manifest = load_model_folder(a.model)
    view = ChatView.from_manifest(manifest.get("view"))
    ref = tasks[0].snapshot
    cfg = r.grpo.model_copy(update={"steps": a.steps, "save_every": 10_000})
    results: dict[str, list[dict]] = {}
    with ExperimentEnv(a.database_url, resolve_store(ref), ref, r.pool_size) as env:
        ways = {"lockstep": True, "arrival": False}
        for way, lockstep in ways.items():
            runs = []
            for run in (1, 2):
                episodes = EpisodeRollout(tok, env.loop, env.pool, env.cache, make_user(r.train_customer),
                                          max_new_tokens=r.max_new_tokens, max_context=r.max_context, view=view,
                                          temperature=cfg.temperature, limits=EpisodeLimits(max_turns=r.max_turns),
                                          concurrency=concurrency, seed=cfg.seed, lockstep=lockstep)
                digests: list[str] = []

                def rollout(m, step_tasks, g, step, episodes=episodes, digests=digests):
                    traces = episodes(m, step_tasks, g, step)
                    digests.append(traces_digest(traces))
                    return traces

                model = copy.deepcopy(start)
                t0 = time.perf_counter()
                history = GRPOTrainer(model, tok, tasks, rollout, cfg, tempfile.mkdtemp()).run()
                runs.append({"run": run, "seconds": time.perf_counter() - t0, "model": model,
                             "steps": [{"step": m["step"], "reward": m["reward_mean"],
                                        "all_wrong": m["frac_all_wrong"], "kl": m["kl"], "rollouts": d,
                                        "behaviour_gap": m.get("behaviour_gap_max"),
                                        "rollout_s": m["rollout_seconds"]}
                                       for m, d in zip(history, digests, strict=True)]})
            first, second = runs
            diff = max_weight_diff(first.pop("model"), second.pop("model"))
            for run in runs:
                run["max_weight_diff"] = diff
            results[way] = runs
    if a.json:
        print(json.dumps(results))
        return
    print(f"GRPO {a.steps} steps x {cfg.tasks_per_step} tasks x {cfg.group_size} rollouts, recipe {a.recipe}, "
          f"rollout concurrency {concurrency}, each way run twice")
    print("| way | step | reward | all-wrong groups | KL | same rollouts in both runs |")
    print("|---|---|---|---|---|---|")
    for mode, (x, y) in results.items():
        for sx, sy in zip(x["steps"], y["steps"], strict=True):
            print(f"| {mode} | {sx['step']} | {sx['reward']:.3f} / {sy['reward']:.3f} | "
                  f"{sx['all_wrong']:.2f} / {sy['all_wrong']:.2f} | {sx['kl']:.4f} / {sy['kl']:.4f} | "
                  f"{'yes' if sx['rollouts'] == sy['rollouts'] else 'no'} |")
    for mode, (x, y) in results.items():
        gaps = [s["behaviour_gap"] for s in x["steps"] + y["steps"] if s["behaviour_gap"] is not None]
        gap = f"; sampler's log-probs at most {max(gaps):.2g} from the trainer's" if gaps else ""
        print(f"{mode}: largest weight difference after {a.steps} steps {x['max_weight_diff']:.3g}; "
              f"{x['seconds']:.0f} s and {y['seconds']:.0f} s{gap}")
    lock, free = results["lockstep"], results["arrival"]
    ratio = sum(r["seconds"] for r in lock) / sum(r["seconds"] for r in free)
    print(f"lockstep / arrival seconds: {ratio:.2f}")


if __name__ == "__main__":
    main()
