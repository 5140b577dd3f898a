"""The paper table of a finished run, from its evaluations (`DIR/eval/<model>/result.json`,
rl/experiment/stages.py): per evaluation customer, one row per table row (a GRPO row with several
seeds shows the mean of its seeds' models), the gain of MUA-RL over the cold start per seed with a
paired bootstrap interval over tasks, the mean gain over seeds with its interval (a bootstrap over
tasks of each task's mean-over-seeds difference: rl/eval/metrics.py `mean_difference_over_seeds`),
every model's figures, and a note on rows that are not findings. `table_markdown` renders it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from rl.experiment.plan import GRPO_RUNS, ROW_LABELS, grpo_runs, result_marker, row_models
from rl.experiment.recipe import ExperimentRecipe

Result = dict[str, Any]  # one model's figures with one customer (stages.py `evaluation_result`)


def _mean(xs: list[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.fmean(vals) if vals else None


def row_figures(results: list[Result]) -> dict[str, Any]:
    """One row from its models' results (one per seed): pass^1, TCR, per tag and sampled pass^k as
    means over the models, exclusions summed, and each model's pass^1 (`pass1_by_seed`)."""
    tags = sorted({t for r in results for t in r["by_tag"]})
    sampled = [r["sampled"] for r in results if r.get("sampled")]
    ks = sorted({k for s in sampled for k in s["pass_hat_k"]}, key=int)
    row: dict[str, Any] = {
        "pass1": statistics.fmean(r["pass1"] for r in results),
        "tcr": statistics.fmean(r["tcr"] for r in results),
        "by_tag": {t: {"n": next(r["by_tag"][t]["n"] for r in results if t in r["by_tag"]),
                       "pass1": statistics.fmean(r["by_tag"][t]["pass1"] for r in results if t in r["by_tag"])}
                   for t in tags},
        "excluded": sum(r["excluded"] for r in results),
        "simulator_failures": sum(r["simulator_failures"] for r in results),
        "n_seeds": len(results),
        "pass1_by_seed": [r["pass1"] for r in results],
        "sampled_pass_hat_k": {k: _mean([s["pass_hat_k"].get(k) for s in sampled]) for k in ks} if sampled else None,
    }
    if len(results) == 1:
        row["pass1_ci95"] = results[0].get("pass1_ci95")
    return row


def seed_gains(control: Result, runs: dict[int, Result]) -> dict[str, Any]:
    """MUA-RL (`runs`: GRPO seed -> result) against the cold start (`control`) in greedy pass^1, on
    the tasks every one of them played validly: per seed the two pass^1 and the gain with its paired
    bootstrap interval, then the mean gain over seeds with its interval (module docstring). All in
    0..1 units."""
    from rl.eval.metrics import mean_difference_over_seeds, paired_difference

    tasks = [t for t, v in control["by_task"].items()
             if v is not None and all(r["by_task"].get(t) is not None for r in runs.values())]
    if not tasks:
        return {"seeds": [], "gain_mean": None, "gain_ci95": None, "n_paired_tasks": 0}
    base = {t: float(control["by_task"][t]) for t in tasks}
    per_run = {s: {t: float(r["by_task"][t]) for t in tasks} for s, r in runs.items()}
    seeds = []
    for s, scores in per_run.items():
        gain, ci = paired_difference(scores, base)
        seeds.append({"seed": s, "cold_start": statistics.fmean(base.values()),
                      "mua_rl": statistics.fmean(scores.values()), "gain": gain, "gain_ci95": list(ci)})
    mean, ci = mean_difference_over_seeds(list(per_run.values()), base)
    return {"seeds": seeds, "gain_mean": mean, "gain_ci95": list(ci), "n_paired_tasks": len(tasks)}


def row_notes(out: Path, recipe: ExperimentRecipe) -> dict[str, str]:
    """What a reader must know about a row that is not a finding: the base is a random network; a
    GRPO row whose runs had no reward signal (every rollout of every step scored 0) learned nothing
    from GRPO, and one that kept the base's weights took the base's evaluation; an ablation that ran
    for fewer seeds than MUA-RL says so."""
    notes = {"base": "random initialisation, never trained on any text: the floor, not a baseline"}
    runs = grpo_runs(recipe)
    n_main = sum(r.row == "mua_rl" for r in runs)
    for row in GRPO_RUNS:
        mine = [r for r in runs if r.row == row]
        if not mine:  # an ablation the recipe does not run has no row
            continue
        said = []
        metrics = [_metrics(out / "grpo" / r.name / "metrics.jsonl") for r in mine]
        if metrics and all(ms and not any(m.get("reward_mean") for m in ms) for ms in metrics):
            rollouts = sum(m.get("rollouts", 0) for ms in metrics for m in ms)
            start = GRPO_RUNS[row][0]
            said.append(f"GRPO from the {'random base' if start == 'base' else start}: none of its {rollouts} "
                        "rollouts earned any reward, so every advantage was 0 and GRPO had no signal")
        reused = [r.name for r in mine if _same_weights_as(out, r.name) == "base"]
        if reused:
            said.append(f"{', '.join(reused)} kept the base's very weights, so the base's evaluation is "
                        f"{'its' if len(reused) == 1 else 'theirs'} (not played again)")
        if len(mine) < n_main:
            said.append(f"{len(mine)} seed{'s' if len(mine) > 1 else ''} (GRPO seed "
                        f"{', '.join(str(r.seed) for r in mine)}), MUA-RL {n_main}")
        if said:
            notes[row] = "; ".join(said)
    return notes


def _same_weights_as(out: Path, model: str) -> str | None:
    """The model whose evaluation `model` took because it has that model's weights (stages.py)."""
    path = result_marker(out, f"eval_{model}")
    return json.loads(path.read_text()).get("same_weights_as") if path.exists() else None


def _metrics(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def build_table(recipe: ExperimentRecipe, results: dict[str, dict[str, Result]], customers: list[str],
                notes: dict[str, str]) -> dict[str, Any]:
    """The table's figures (see the module docstring) from `results` (model -> customer -> result)."""
    models = row_models(recipe)
    runs = [r for r in grpo_runs(recipe) if r.row == "mua_rl"]
    by_customer, gains = {}, {}
    for c in customers:
        by_customer[c] = {row: {**row_figures([results[m][c] for m in models[row]]),
                                **({"note": notes[row]} if row in notes else {})} for row in models}
        gains[c] = seed_gains(results["cold_start"][c], {r.seed: results[r.name][c] for r in runs})
    main = customers[0]
    every = {m: {c: {k: results[m][c].get(k) for k in ("pass1", "pass1_ci95", "tcr", "excluded", "sampled")}
                 for c in customers} for row in models for m in models[row]}
    return {"rows": by_customer[main], "eval_customer": main, "eval_customers": customers,
            "seeds": gains[main]["seeds"], "gain_mean": gains[main]["gain_mean"],
            "gain_ci95": gains[main]["gain_ci95"], "n_paired_tasks": gains[main]["n_paired_tasks"],
            "rows_by_customer": by_customer, "gains_by_customer": gains, "models": every,
            "eval_trials": recipe.eval_trials, "eval_set": recipe.eval_set, "task_seed": recipe.task_seed,
            "test_task_seed": recipe.test_task_seed}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _ci(ci: list[float] | None) -> str:
    return "-" if not ci else f"[{_pct(ci[0])}, {_pct(ci[1])}]"


def _signed(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}"


def table_markdown(table: dict[str, Any]) -> str:
    main, customers = table["eval_customer"], table["eval_customers"]
    trials = table["eval_trials"]
    seed_note = f"; test task seed {table['test_task_seed']}" if table["eval_set"] == "test" else ""
    lines = [f"# Paper table (recipe {table.get('recipe', '?')})", "",
             f"{table['n_eval_tasks']} {table['eval_set']} tasks (task seed {table['task_seed']}{seed_note}) on "
             "customers no training task uses, evaluated with the customers "
             + ", ".join(f"`{c}`" for c in customers) + f" (`{main}` gives the rows). Each task is played "
             f"{trials} time{'s' if trials > 1 else ''} per customer: once greedy (pass^1 below)"
             + (f" and {trials - 1} times sampled at temperature 1 (sampled pass^k)" if trials > 1 else "")
             + f". In %. Wall time {table['wall_seconds'] / 60:.1f} min.", ""]
    if table.get("reused_stages"):
        lines += [f"Resumed: {', '.join(table['reused_stages'])} were already in the folder and were not rerun; "
                  "the wall time counts only the stages run here.", ""]
    for c in [main, *[x for x in customers if x != main]]:
        lines += _gain_lines(table["gains_by_customer"][c], c)
    for c in [main, *[x for x in customers if x != main]]:
        lines += _row_lines(table["rows_by_customer"][c], c, trials)
    sampled_heads = [f"sampled pass^{k} [95% CI]" for k in range(1, trials)]
    lines += ["## Every model", "", _row(["model", "customer", "pass^1 greedy [95% CI]", "TCR", *sampled_heads]),
              _row(["---"] * (4 + len(sampled_heads)))]
    for m, by_c in table["models"].items():
        for c, r in by_c.items():
            s = r.get("sampled") or {}
            cells = [f"{_pct(s.get('pass_hat_k', {}).get(str(k)))} {_ci(s.get('pass_hat_k_ci95', {}).get(str(k)))}"
                     for k in range(1, trials)]
            lines.append(_row([m, c, f"{_pct(r['pass1'])} {_ci(r.get('pass1_ci95'))}", _pct(r["tcr"]), *cells]))
    lines.append("")
    if table.get("selection"):
        lines += ["Which GRPO step each run ships (rl/grpo/selection.py):", ""]
        lines += _selection_lines(table["selection"])
        lines.append("")
    lines += [f"Command: `{table['command']}`", ""]
    return "\n".join(lines)


def _row(cells: list[str]) -> str:
    """One markdown table row; with one trial per task there are no sampled columns, and no empty one."""
    return "| " + " | ".join(cells) + " |"


def _gain_lines(g: dict[str, Any], customer: str) -> list[str]:
    lines = [f"## MUA-RL over the cold start, `{customer}` customer", "",
             f"Greedy pass^1 on the {g['n_paired_tasks']} tasks every model played validly; 95% intervals: "
             "paired bootstrap over tasks (the same resample for both models); for the mean over seeds, a "
             "bootstrap over tasks of each task's mean-over-seeds difference (seeds held fixed).", "",
             "| GRPO seed | cold start | MUA-RL | gain | 95% CI |", "|---|---|---|---|---|"]
    for s in g["seeds"]:
        lines.append(f"| {s['seed']} | {_pct(s['cold_start'])} | {_pct(s['mua_rl'])} | {_signed(s['gain'])} | "
                     f"{_ci(s['gain_ci95'])} |")
    if g["seeds"]:
        mean_rl = statistics.fmean(s["mua_rl"] for s in g["seeds"])
        lines.append(f"| mean of {len(g['seeds'])} | {_pct(g['seeds'][0]['cold_start'])} | {_pct(mean_rl)} | "
                     f"**{_signed(g['gain_mean'])}** | {_ci(g['gain_ci95'])} |")
    return [*lines, ""]


def _row_lines(rows: dict[str, Any], customer: str, trials: int) -> list[str]:
    tags = sorted({t for r in rows.values() for t in r["by_tag"] if not t.startswith("category:")})
    lines = [f"## Rows, `{customer}` customer", "",
             "GRPO rows: the mean over their seeds' models (each seed's pass^1 in brackets).", "",
             "| model | seeds | pass^1 | TCR | " + ("sampled pass^1 | " if trials > 1 else "")
             + " | ".join(tags) + " |", "|---|---|---|---|" + ("---|" if trials > 1 else "") + "---|" * len(tags)]
    for name, r in rows.items():
        cells = [f"{_pct(r['by_tag'][t]['pass1'])} (n={r['by_tag'][t]['n']})" if t in r["by_tag"] else "-"
                 for t in tags]
        per_seed = f" ({', '.join(_pct(x) for x in r['pass1_by_seed'])})" if r["n_seeds"] > 1 else ""
        sampled = [_pct((r.get("sampled_pass_hat_k") or {}).get("1"))] if trials > 1 else []
        lines.append(f"| {ROW_LABELS.get(name, name)} | {r['n_seeds']} | {_pct(r['pass1'])}{per_seed} | "
                     f"{_pct(r['tcr'])} | " + " | ".join([*sampled, *cells]) + " |")
    notes = [(name, r["note"]) for name, r in rows.items() if r.get("note")]
    if notes:
        lines += ["", *[f"- {ROW_LABELS.get(n, n)}: {note}." for n, note in notes]]
    return [*lines, ""]


def _selection_lines(selection: dict[str, Any]) -> list[str]:
    lines = []
    for row, sel in selection.items():
        if not sel.get("scores"):
            lines.append(f"- {row} ships step {sel['step']}, its last.")
            continue
        scores = ", ".join(f"step {k}: {100 * float(v):.1f}" for k, v in sel["scores"].items())
        lines.append(f"- {row} ships step {sel['step']}, the best on {sel['validation_tasks']} validation tasks "
                     f"(reward in % by step: {scores}).")
    return lines
