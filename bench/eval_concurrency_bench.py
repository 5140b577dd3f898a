"""How many conversations should an evaluation decode at once? One model of a paper-table folder
evaluated on the same tasks at several `eval_concurrency` values, side by side in one run: wall
seconds, episodes per second, the ratio to the first value, and how many tasks each passed.

The experiment's evaluation (rl/experiment/stages.py `Stages.evaluate`) plays every task with a
lockstep `LocalPolicy` whose batches hold every running conversation, up to 64 (`max_batch`), and
the harness runs `eval_concurrency` conversations at once (cpu-tiny: 32). A decoding step of a small
model on one CPU thread costs much the same for 32 rows as for 64 where Python and the step's fixed
work dominate, and twice as much where reading each row's cache does; this measures which. The
greedy decisions may differ slightly between batch sizes (a batch's rounding), so the passes are
printed too. An untimed pass at the largest value comes first. It plays the folder's evaluation set
with one customer, greedy (trial 0) unless `--trials` asks for sampled ones as well, one torch
thread (as each of the experiment's two workers has) by default.

Usage: .venv/bin/python bench/eval_concurrency_bench.py --out DIR [--model cold_start]
       [--customer heldout-known] [--concurrency 32,64] [--tasks 105] [--trials 1]
       [--database-url URL] [--threads 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def measure(out: Path, model_name: str, customer: str, levels: list[int], n_tasks: int, trials: int,
            database_url: str | None, threads: int = 1) -> list[dict[str, Any]]:
    import torch

    from rl.env.episode import EpisodeLimits
    from rl.eval.harness import evaluate
    from rl.experiment.environment import ExperimentEnv
    from rl.experiment.plan import SilentReporter
    from rl.experiment.recipe import ExperimentRecipe
    from rl.experiment.stages import Stages
    from rl.models.tiny import load_model_folder
    from rl.policies.local import LocalAgentPolicy, LocalPolicy
    from rl.simulator.base import make_user
    from rl.tasks.schema import load_tasks
    from rl.tasks.stores import resolve_store

    recipe = ExperimentRecipe.model_validate_json((out / "recipe.json").read_text())
    tasks = load_tasks(out / "tasks" / f"{recipe.eval_set}.json")[:n_tasks]
    torch.set_num_threads(threads)
    rows: list[dict[str, Any]] = []
    sandboxes = 2 * max(levels)
    with ExperimentEnv(database_url, resolve_store(recipe.store, None), recipe.store, 4,
                       max_sandboxes=sandboxes) as env:
        stages = Stages(recipe, out, env, SilentReporter(), [customer])
        model, tok, _ = load_model_folder(stages.model_dir(model_name))
        model.eval()
        # an untimed pass first: the first evaluation also makes the snapshot's sandboxes and the
        # tasks' gold states, which would count against whichever level came first
        for i, level in enumerate([max(levels), *levels]):
            engine = LocalPolicy(model, tok, greedy=trials == 1, max_new_tokens=recipe.max_new_tokens,
                                 max_context=recipe.max_context, view=stages.view, max_batch=max(64, level),
                                 lockstep=True)
            start = time.perf_counter()
            result = env.run(evaluate(
                tasks, LocalAgentPolicy(engine, model_name=model_name), make_user(customer), trials=trials,
                concurrency=level, seed=0 if trials == 1 else 1, server_url=env.server_url,
                limits=EpisodeLimits(max_turns=recipe.max_turns), snapshots={recipe.store: env.snapshot},
                max_sandboxes=sandboxes))
            seconds = time.perf_counter() - start
            if i == 0:
                continue
            scored = [t for t in result.trajectories if t.excluded is None]
            rows.append({"concurrency": level, "episodes": len(result.trajectories), "seconds": round(seconds, 1),
                         "episodes_per_s": round(len(result.trajectories) / seconds, 3),
                         "largest_batch": engine.stats.largest_batch,
                         "new_tokens_per_s": round(engine.stats.new_tokens / seconds, 1),
                         "passed": sum(float(t.reward or 0.0) == 1.0 for t in scored), "scored": len(scored)})
    for r in rows:
        r["speedup"] = round(rows[0]["seconds"] / r["seconds"], 2)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="a paper-table folder with tasks/ and models/")
    ap.add_argument("--model", default="cold_start")
    ap.add_argument("--customer", default="heldout-known")
    ap.add_argument("--concurrency", default="32,64")
    ap.add_argument("--tasks", type=int, default=105, help="the first N tasks of the folder's evaluation set")
    ap.add_argument("--trials", type=int, default=1, help="1: the greedy trial; more: sampled trials")
    ap.add_argument("--database-url", default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    levels = [int(x) for x in a.concurrency.split(",")]
    if not levels or min(levels) < 1 or a.tasks < 1 or a.trials < 1:
        raise SystemExit("--concurrency needs positive integers; --tasks and --trials at least 1")
    rows = measure(a.out, a.model, a.customer, levels, a.tasks, a.trials, a.database_url, a.threads)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print("| eval_concurrency | episodes | seconds | episodes/s | new tokens/s | largest batch | passed | "
          "speed-up |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['concurrency']} | {r['episodes']} | {r['seconds']} | {r['episodes_per_s']} | "
              f"{r['new_tokens_per_s']} | {r['largest_batch']} | {r['passed']}/{r['scored']} | {r['speedup']}x |")


if __name__ == "__main__":
    main()
