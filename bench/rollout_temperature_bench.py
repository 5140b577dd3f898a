"""At which temperature should GRPO sample its rollouts? A model's success on training-side tasks
when sampled at several temperatures, side by side in one run, with its greedy success beside them.

GRPO improves the distribution it samples from. When a model's sampled success is far below its
greedy success, GRPO's first steps mostly cut the sampling tail (sampled success rises towards
greedy) and change few greedy decisions, which are what pass^1 measures. This bench plays the RL
task set of a paper-table folder (never dev or test tasks) with the training customer: `--per-kind`
tasks of each kind, G = `--trials` samples per task at each temperature (and one greedy episode),
and prints per temperature the mean reward, the groups that carry a GRPO signal (0 < successes < G)
and the mean reward per kind. `--kinds` keeps some kinds only; `--episodes DIR` writes each
temperature's episodes to DIR/<temperature>/episodes.jsonl, to read why samples fail.

Usage: .venv/bin/python bench/rollout_temperature_bench.py --out DIR [--model cold_start]
       [--temperatures greedy,1.0,0.7,0.5] [--per-kind 4] [--trials 8] [--kinds K1,K2] [--episodes DIR]
       [--database-url URL] [--threads 1] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any


def measure(out: Path, model_name: str, temperatures: list[str], per_kind: int, trials: int,
            database_url: str | None, customer: str | None = None, threads: int = 1,
            kinds: list[str] | None = None, episodes: Path | None = None) -> list[dict[str, Any]]:
    import torch

    from rl.env.episode import EpisodeLimits
    from rl.eval.harness import evaluate
    from rl.experiment.environment import ExperimentEnv
    from rl.experiment.plan import SilentReporter
    from rl.experiment.recipe import ExperimentRecipe
    from rl.experiment.stages import Stages
    from rl.grpo.batches import task_kind
    from rl.models.tiny import load_model_folder
    from rl.policies.local import LocalAgentPolicy, LocalPolicy
    from rl.simulator.base import make_user
    from rl.tasks.schema import load_tasks
    from rl.tasks.stores import resolve_store

    recipe = ExperimentRecipe.model_validate_json((out / "recipe.json").read_text())
    customer = customer or recipe.train_customer
    by_kind: dict[str, list[Any]] = defaultdict(list)
    for t in load_tasks(out / "tasks" / "rl.json"):
        by_kind[task_kind(t) or "other"].append(t)
    unknown = sorted(set(kinds or ()) - set(by_kind))
    if unknown:
        raise SystemExit(f"no RL task of kind {unknown}; the RL set has {sorted(by_kind)}")
    tasks = [t for k in sorted(by_kind) if not kinds or k in kinds for t in by_kind[k][:per_kind]]
    torch.set_num_threads(threads)
    rows = []
    with ExperimentEnv(database_url, resolve_store(recipe.store, None), recipe.store, 4,
                       max_sandboxes=24) as env:
        stages = Stages(recipe, out, env, SilentReporter(), [customer])
        model, tok, _ = load_model_folder(stages.model_dir(model_name))
        model.eval()
        for temp in temperatures:
            greedy = temp == "greedy"
            engine = LocalPolicy(model, tok, greedy=greedy, temperature=1.0 if greedy else float(temp),
                                 max_new_tokens=recipe.max_new_tokens, max_context=recipe.max_context,
                                 view=stages.view, max_batch=64, seed=7)
            n = 1 if greedy else trials
            result = env.run(evaluate(
                tasks, LocalAgentPolicy(engine, model_name=model_name), make_user(customer), trials=n,
                concurrency=32, seed=3, server_url=env.server_url, limits=EpisodeLimits(max_turns=recipe.max_turns),
                snapshots={recipe.store: env.snapshot}, max_sandboxes=24,
                out_dir=episodes / temp if episodes else None))
            wins: dict[str, list[float]] = defaultdict(list)
            for tr in result.trajectories:
                if tr.excluded is None:
                    wins[tr.task_id].append(float(tr.reward or 0.0))
            kinds: dict[str, list[float]] = defaultdict(list)
            for t in tasks:
                kinds[task_kind(t) or "other"] += wins.get(t.id, [])
            rewards = [x for w in wins.values() for x in w]
            rows.append({"temperature": temp, "episodes": len(rewards),
                         "reward": sum(rewards) / max(1, len(rewards)),
                         "informative_groups": None if greedy else sum(0 < sum(w) < len(w) for w in wins.values()),
                         "groups": len(wins),
                         "by_kind": {k: round(sum(v) / len(v), 3) for k, v in sorted(kinds.items()) if v}})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="a paper-table folder with tasks/ and models/")
    ap.add_argument("--model", default="cold_start")
    ap.add_argument("--temperatures", default="greedy,1.0,0.7,0.5")
    ap.add_argument("--per-kind", type=int, default=4)
    ap.add_argument("--trials", type=int, default=8, help="samples per task (the GRPO group size)")
    ap.add_argument("--customer", default=None, help="default: the recipe's training customer")
    ap.add_argument("--kinds", default=None, help="comma-separated task kinds (default: every kind of the RL set)")
    ap.add_argument("--episodes", type=Path, default=None, help="write each temperature's episodes under this folder")
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the experiment's own use the rest)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = measure(a.out, a.model, a.temperatures.split(","), a.per_kind, a.trials, a.database_url, a.customer,
                   a.threads, a.kinds.split(",") if a.kinds else None, a.episodes)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    kinds = sorted({k for r in rows for k in r["by_kind"]})
    print("| temperature | episodes | reward | informative groups | " + " | ".join(kinds) + " |")
    print("|---" * (4 + len(kinds)) + "|")
    for r in rows:
        inf = "-" if r["informative_groups"] is None else f"{r['informative_groups']}/{r['groups']}"
        print(f"| {r['temperature']} | {r['episodes']} | {r['reward']:.3f} | {inf} | "
              + " | ".join(f"{r['by_kind'].get(k, 0):.2f}" for k in kinds) + " |")


if __name__ == "__main__":
    main()
