"""Fewer GRPO steps without rerunning GRPO: a paper-table folder's MUA-RL checkpoints at earlier steps,
evaluated exactly as its shipped models were (the same evaluation set, customers and seeds), beside
the cold start (step 0) and the shipped last step.

GRPO's learning rate is constant, so the checkpoint at step k of a run is the model a k-step run with
the same seed would ship. Keep the checkpoints when the run is made (`--set grpo.keep_checkpoints=N`
with N at least steps / save_every; the default keeps the last two). Each checkpoint is copied to
`DIR/models/<row>_step<k>` and evaluated by the experiment's own stage (`DIR/eval/<row>_step<k>/`,
resumable). Per customer and step: the mean over seeds of greedy pass^1 (each seed's beside it), its
gain over the cold start, and its difference from the last step, both as a bootstrap over tasks of
each task's mean-over-seeds difference (seeds held fixed, as the paper table's mean gain). A choice of
step made with it should say its rule before it is run.

With `--average 14 16 18`, also each run's parameter average of those checkpoints (latest weight
averaging), evaluated the same way.

Usage: .venv/bin/python bench/checkpoint_curve.py --out DIR --steps 6 12 [--average 14 16 18] [--rows mua_rl_s0 ...]
       [--database-url URL] [--threads N] [--table-only] [--json]
(`--rows` lets two processes evaluate different seeds side by side, each printing its rows' curve;
`--table-only` evaluates nothing.)
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from compare_runs import by_task, mua_models


def checkpoint_model(out: Path, row: str, step: int) -> str:
    """The model name of run `row`'s checkpoint at `step`, copied into `out/models/` (weights,
    tokenizer and manifest; not the optimizer state) if not there yet."""
    name = f"{row}_step{step:02d}"
    dest = out / "models" / name
    if not (dest / "manifest.json").exists():
        src = out / "grpo" / row / "checkpoints" / f"step_{step:05d}"
        if not src.is_dir():
            kept = sorted(p.name for p in src.parent.glob("step_*"))
            raise SystemExit(f"{src} is missing (kept: {', '.join(kept) or 'none'}); rerun the experiment "
                             "with --set grpo.keep_checkpoints=N to keep every checkpoint")
        tmp = dest.with_name(dest.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns("trainer_state.pt"))
        tmp.rename(dest)
    return name


def averaged_model(out: Path, row: str, steps: list[int]) -> str:
    """The model name of the parameter average of run `row`'s checkpoints at `steps` (latest weight
    averaging: one trajectory's nearby checkpoints, each weight the plain mean), written to
    `out/models/` if not there yet."""
    import torch

    from rl.models.tiny import load_model_folder, save_model_folder

    name = f"{row}_avg{'-'.join(f'{k:02d}' for k in steps)}"
    dest = out / "models" / name
    if (dest / "manifest.json").exists():
        return name
    models = [load_model_folder(out / "models" / checkpoint_model(out, row, k)) for k in steps]
    model, tok, manifest = models[0]
    states = [m.state_dict() for m, _, _ in models]
    with torch.no_grad():
        model.load_state_dict({key: sum(st[key] for st in states) / len(states) for key in states[0]})
    kept = {k: v for k, v in manifest.items() if k not in ("created", "parameters", "training")}
    save_model_folder(model, tok, dest, {**kept, "training": {**manifest.get("training", {}), "step": None},
                                         "averaged_steps": steps})
    return name


def evaluate(out: Path, names: list[str], database_url: str | None, threads: int | None) -> None:
    import torch

    from rl.experiment.environment import ExperimentEnv
    from rl.experiment.plan import SilentReporter, evaluation_customers
    from rl.experiment.recipe import ExperimentRecipe
    from rl.experiment.stages import Stages
    from rl.tasks.schema import load_tasks
    from rl.tasks.stores import resolve_store

    recipe = ExperimentRecipe.model_validate_json((out / "recipe.json").read_text())
    torch.set_num_threads(threads or recipe.threads)
    tasks = load_tasks(out / "tasks" / f"{recipe.eval_set}.json")
    data = resolve_store(recipe.store, None)
    with ExperimentEnv(database_url, data, recipe.store, recipe.pool_size) as env:
        stages = Stages(recipe, out, env, SilentReporter(), evaluation_customers(recipe))
        for name in names:
            print(f"evaluating {name}", flush=True)
            stages.evaluate(name, tasks)


def curve(out: Path, rows: list[str], steps: list[int], average: list[int] | None = None) -> dict[str, Any]:
    """Per customer and step (0: the cold start; the recipe's last step: the shipped models; `avg`:
    the average of the checkpoints at `average`)."""
    from rl.eval.metrics import mean_difference_over_seeds
    from rl.experiment.plan import evaluation_customers
    from rl.experiment.recipe import ExperimentRecipe

    recipe = ExperimentRecipe.model_validate_json((out / "recipe.json").read_text())
    last = recipe.grpo.steps
    if recipe.n_val_tasks:
        raise SystemExit("this folder's runs shipped the checkpoint their validation chose, not the last step: "
                         "the curve's last row would not be what the table reports")
    res: dict[str, Any] = {"eval_set": recipe.eval_set, "rows": rows, "last_step": last, "average": average,
                           "customers": {}}
    for customer in evaluation_customers(recipe):
        models: dict[int | str, list[str]] = {k: [f"{r}_step{k:02d}" for r in rows] for k in steps} | {last: rows}
        if average:
            models["avg"] = [f"{r}_avg{'-'.join(f'{k:02d}' for k in average)}" for r in rows]
        cold_all = by_task(out, "cold_start", customer)
        runs = {k: [by_task(out, m, customer) for m in ms] for k, ms in models.items()}
        common = sorted(t for t, v in cold_all.items()
                        if v is not None and all(r.get(t) is not None for rs in runs.values() for r in rs))
        cold = {t: float(cold_all[t]) for t in common}
        per = {k: [{t: float(r[t]) for t in common} for r in rs] for k, rs in runs.items()}
        final_mean = {t: sum(s[t] for s in per[last]) / len(per[last]) for t in common}
        by_step: dict[str, Any] = {"0": {"pass1": sum(cold.values()) / len(common)}}
        for k in sorted(per, key=lambda k: (isinstance(k, str), k)):
            gain, gci = mean_difference_over_seeds(per[k], cold)
            row = {"pass1": sum(sum(s.values()) for s in per[k]) / len(per[k]) / len(common),
                   "per_seed": [sum(s.values()) / len(common) for s in per[k]], "gain": gain, "gain_ci95": list(gci)}
            if k != last:
                diff, dci = mean_difference_over_seeds(per[k], final_mean)
                row |= {"minus_last": diff, "minus_last_ci95": list(dci)}
            by_step[str(k)] = row
        res["customers"][customer] = {"tasks": len(common), "steps": by_step}
    return res


def markdown(res: dict[str, Any]) -> str:
    pct = 100.0
    lines = [f"{res['eval_set']} set; greedy pass^1 in %, mean over {len(res['rows'])} GRPO seeds "
             f"({', '.join(res['rows'])}); step {res['last_step']} is the shipped model", ""]
    for customer, c in res["customers"].items():
        lines += [f"## {customer} customer ({c['tasks']} tasks every model played)", "",
                  "| GRPO step | pass^1 (per seed) | gain over cold start [95% CI] | "
                  f"minus step {res['last_step']} [95% CI] |",
                  "|---|---|---|---|"]
        for k, s in c["steps"].items():
            if k == "0":
                lines.append(f"| 0 (cold start) | {s['pass1'] * pct:.1f} | | |")
                continue
            seeds = ", ".join(f"{x * pct:.1f}" for x in s["per_seed"])
            gain = f"{s['gain'] * pct:+.1f} [{s['gain_ci95'][0] * pct:+.1f}, {s['gain_ci95'][1] * pct:+.1f}]"
            last = (f"{s['minus_last'] * pct:+.1f} [{s['minus_last_ci95'][0] * pct:+.1f}, "
                    f"{s['minus_last_ci95'][1] * pct:+.1f}]") if "minus_last" in s else ""
            label = f"average of {', '.join(map(str, res['average']))}" if k == "avg" else k
            lines.append(f"| {label} | {s['pass1'] * pct:.1f} ({seeds}) | {gain} | {last} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, nargs="+", required=True)
    ap.add_argument("--average", type=int, nargs="+", help="also the parameter average of these steps' checkpoints")
    ap.add_argument("--rows", nargs="+", help="GRPO runs (default: every mua_rl_s* of the folder)")
    ap.add_argument("--database-url")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = a.rows or mua_models(a.out)
    if not a.table_only:
        names = [checkpoint_model(a.out, r, k) for r in rows for k in a.steps]
        names += [averaged_model(a.out, r, a.average) for r in rows] if a.average else []
        evaluate(a.out, names, a.database_url, a.threads)
    res = curve(a.out, rows, a.steps, a.average)
    print(json.dumps(res, indent=1) if a.json else markdown(res))


if __name__ == "__main__":
    main()
