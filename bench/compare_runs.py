"""Two GRPO recipes side by side: paper-table folders that share one cold start and one evaluation set
(a dev-set decision: the same command with one `--set` changed, the cold start copied or rebuilt
bit for bit), compared on the greedy episodes of their MUA-RL models.

For each evaluation customer: each folder's cold start and mean-over-seeds MUA-RL pass^1 with its
gain, and the candidate minus the baseline, as a paired bootstrap over tasks of each task's
mean-over-seeds success (the seeds held fixed, as the paper table's mean gain). Per kind, the
successes of each side. A recipe choice made with it should say its rule before the runs.

Usage: .venv/bin/python bench/compare_runs.py --baseline DIR --candidate DIR [--json]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any


def by_task(folder: Path, model: str, customer: str) -> dict[str, int | None]:
    from rl.experiment.plan import customer_folder

    path = folder / "eval" / model / customer_folder(customer) / "result.json"
    return json.loads(path.read_text())["by_task"]


def mua_models(folder: Path) -> list[str]:
    """The shipped MUA-RL models of `folder` as its recipe names them (not the earlier checkpoints
    bench/checkpoint_curve.py adds beside them)."""
    from rl.experiment.plan import row_models
    from rl.experiment.recipe import ExperimentRecipe

    return row_models(ExperimentRecipe.model_validate_json((folder / "recipe.json").read_text()))["mua_rl"]


def compare(baseline: Path, candidate: Path) -> dict[str, Any]:
    from rl.eval.metrics import mean_difference_over_seeds, paired_difference
    from rl.experiment.recipe import ExperimentRecipe
    from rl.grpo.batches import task_kind
    from rl.tasks.schema import load_tasks

    recipe = ExperimentRecipe.model_validate_json((baseline / "recipe.json").read_text())
    other = ExperimentRecipe.model_validate_json((candidate / "recipe.json").read_text())
    if (other.eval_set, other.eval_customers) != (recipe.eval_set, recipe.eval_customers):
        raise SystemExit(f"the folders were evaluated differently: {recipe.eval_set} with {recipe.eval_customers} "
                         f"against {other.eval_set} with {other.eval_customers}")
    # a committed results folder keeps its evaluations but not its tasks: the kinds come from whichever
    # folder still has them, and the two task sets are compared by the ids their evaluations played
    task_files = [f / "tasks" / f"{recipe.eval_set}.json" for f in (baseline, candidate)]
    task_file = next((f for f in task_files if f.exists()), None)
    if task_file is None:
        raise SystemExit(f"neither folder has tasks/{recipe.eval_set}.json")
    tasks = {t.id: t for t in load_tasks(task_file)}
    for folder in (baseline, candidate):
        if set(by_task(folder, "cold_start", recipe.eval_customers[0])) != set(tasks):
            raise SystemExit("the two folders were evaluated on different task sets")
    out: dict[str, Any] = {"eval_set": recipe.eval_set, "tasks": len(tasks), "customers": {}}
    for customer in recipe.eval_customers:
        sides = {}
        for name, folder in (("baseline", baseline), ("candidate", candidate)):
            sides[name] = (by_task(folder, "cold_start", customer),
                           [by_task(folder, m, customer) for m in mua_models(folder)])
        # every figure over the tasks every model of both folders played validly
        common = sorted(t for t in tasks if all(
            r.get(t) is not None for cold, seeds in sides.values() for r in (cold, *seeds)))
        # one cold start shared (copied, or rebuilt by the deterministic SFT): its two evaluations
        # pass and fail the same tasks
        agree = sum(sides["baseline"][0][t] == sides["candidate"][0][t] for t in common)
        row: dict[str, Any] = {"tasks": len(common), "cold_starts_agree": agree}
        means, colds = {}, {}
        for name, (cold_all, seeds_all) in sides.items():
            cold = colds[name] = {t: float(cold_all[t]) for t in common}
            seeds = [{t: float(s[t]) for t in common} for s in seeds_all]
            means[name] = {t: sum(s[t] for s in seeds) / len(seeds) for t in common}
            gain, ci = mean_difference_over_seeds(seeds, cold)
            row[name] = {"seeds": len(seeds), "cold_start": sum(cold.values()) / len(common),
                         "mua_rl": sum(means[name].values()) / len(common),
                         "mua_rl_per_seed": [sum(s.values()) / len(common) for s in seeds],
                         "gain": gain, "gain_ci95": list(ci)}
        diff, ci = paired_difference(means["candidate"], means["baseline"])
        row["candidate_minus_baseline"] = {"diff": diff, "ci95": list(ci)}
        kinds: dict[str, dict[str, float]] = defaultdict(lambda: {"n": 0, "cold": 0.0, "baseline": 0.0,
                                                                  "candidate": 0.0})
        for t in common:
            k = kinds[task_kind(tasks[t]) or "other"]
            k["n"] += 1
            k["cold"] += colds["baseline"][t]
            k["baseline"] += means["baseline"][t]
            k["candidate"] += means["candidate"][t]
        row["by_kind"] = dict(sorted(kinds.items()))
        out["customers"][customer] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--candidate", type=Path, required=True)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = compare(a.baseline, a.candidate)
    if a.json:
        print(json.dumps(res, indent=1))
        return
    pct = 100.0
    print(f"{res['tasks']} {res['eval_set']} tasks; greedy pass^1 in %; MUA-RL = mean over its seeds\n")
    for customer, row in res["customers"].items():
        print(f"## {customer} customer ({row['tasks']} tasks every model played)\n")
        print(f"The two cold starts' greedy results (pass or fail) are the same on {row['cold_starts_agree']} of "
              f"{row['tasks']} tasks.\n")
        print("| recipe | seeds | cold start | MUA-RL (per seed) | gain [95% CI] |\n|---|---|---|---|---|")
        for name in ("baseline", "candidate"):
            s = row[name]
            seeds = ", ".join(f"{x * pct:.1f}" for x in s["mua_rl_per_seed"])
            print(f"| {name} | {s['seeds']} | {s['cold_start'] * pct:.1f} | {s['mua_rl'] * pct:.1f} ({seeds}) | "
                  f"{s['gain'] * pct:+.1f} [{s['gain_ci95'][0] * pct:+.1f}, {s['gain_ci95'][1] * pct:+.1f}] |")
        d = row["candidate_minus_baseline"]
        lo, hi = d["ci95"]
        print(f"\ncandidate - baseline: {d['diff'] * pct:+.1f} [{lo * pct:+.1f}, {hi * pct:+.1f}]\n")
        print("| kind | n | cold start | baseline | candidate |\n|---|---|---|---|---|")
        for kind, k in row["by_kind"].items():
            print(f"| {kind} | {k['n']} | {k['cold']:.0f} | {k['baseline']:.1f} | {k['candidate']:.1f} |")
        print()


if __name__ == "__main__":
    main()
