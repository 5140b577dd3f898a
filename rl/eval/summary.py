"""The summary of an evaluation: pass^1..pass^K with intervals, TCR, turns, tools, exclusions, by tag.

`summarize(tasks, trajectories, trials)` returns the JSON written to `summary.json` (the contract
is `n_tasks`, `trials`, `pass_hat_k`, `tcr`, `excluded`, `by_tag`; the rest is for people) and
`to_markdown` renders it for `summary.md`. Excluded episodes (failures outside the agent) count
in `excluded` only (cause -> episodes); `simulator_failures` counts those the simulated customer
caused (an endpoint failure, or a customer contradicting its own goal). `failure_causes` counts
why the failed episodes failed (rl/eval/failures.py). `task_success` gives each task's success
rate, what paired comparisons of two models over the same tasks take (rl/eval/metrics.py).
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Any

from rl.env.episode import Trajectory
from rl.eval.failures import count_failures
from rl.eval.metrics import bootstrap_ci, pass_hat_k, pass_hat_k_with_ci
from rl.simulator.base import simulator_failures
from rl.tasks.schema import Task


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _task_results(tasks: list[Task], trajs: list[Trajectory]) -> dict[str, tuple[int, int]]:
    valid: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        if t.excluded is None:
            valid[t.task_id].append(t)
    return {task.id: (len(valid[task.id]), sum(t.success for t in valid[task.id])) for task in tasks}


def task_success(tasks: list[Task], trajs: list[Trajectory]) -> dict[str, float | None]:
    """Per task id, the fraction of its valid trials that succeeded; None when none was valid."""
    return {tid: (c / n if n else None) for tid, (n, c) in _task_results(tasks, trajs).items()}


def summarize(tasks: list[Task], trajs: list[Trajectory], trials: int, *, meta: dict[str, Any] | None = None,
              seed: int = 0) -> dict[str, Any]:
    results = _task_results(tasks, trajs)
    pairs = list(results.values())
    ks = range(1, trials + 1)
    phk, cis = {}, {}
    for k in ks:
        value, ci = pass_hat_k_with_ci(pairs, k, seed=seed)
        phk[str(k)] = _r(value)
        cis[str(k)] = [_r(ci[0]), _r(ci[1])] if ci else None
    valid = [t for t in trajs if t.excluded is None]
    tcrs = [t.tcr for t in valid if t.tcr is not None]
    tcr_ci = bootstrap_ci(tcrs, seed=seed)
    by_tag: dict[str, dict[str, Any]] = {}
    tags = sorted({tag for task in tasks for tag in task.tags})
    task_tcr: dict[str, list[float]] = defaultdict(list)
    for t in valid:
        if t.tcr is not None:
            task_tcr[t.task_id].append(t.tcr)
    for tag in tags:
        ids = [task.id for task in tasks if tag in task.tags]
        sub = [results[i] for i in ids]
        tag_tcr = [x for i in ids for x in task_tcr[i]]
        by_tag[tag] = {"n": len(ids), "pass_hat_k": {str(k): _r(pass_hat_k(sub, k)) for k in ks},
                       "tcr": _r(statistics.fmean(tag_tcr)) if tag_tcr else None}
    hist = Counter(c.name for t in valid for c in t.tool_calls)
    totals = [t.timings_ms.get("total", 0.0) for t in trajs]
    excluded = dict(Counter(t.excluded for t in trajs if t.excluded))
    return {
        "n_tasks": len(tasks),
        "trials": trials,
        "n_episodes": len(trajs),
        "n_valid": len(valid),
        "pass_hat_k": phk,
        "pass_hat_k_ci95": cis,
        "tcr": _r(statistics.fmean(tcrs)) if tcrs else None,
        "tcr_ci95": [_r(tcr_ci[0]), _r(tcr_ci[1])] if tcr_ci else None,
        "avg_turns": _r(statistics.fmean(t.turns for t in valid)) if valid else None,
        "avg_tool_calls": _r(statistics.fmean(len(t.tool_calls) for t in valid)) if valid else None,
        "tool_histogram": dict(sorted(hist.items(), key=lambda kv: -kv[1])),
        "ended_by": dict(Counter(t.ended_by for t in trajs)),
        "excluded": excluded,
        "simulator_failures": simulator_failures(excluded),
        "episode_ms_p50": _r(statistics.median(totals)) if totals else None,
        "by_tag": by_tag,
        "failure_causes": count_failures(tasks, trajs),
        **(meta or {}),
    }


def to_markdown(s: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    lines = [f"# Evaluation: {s.get('policy', '?')} with {s.get('user', '?')} customers", ""]
    lines.append(f"{s['n_tasks']} tasks x {s['trials']} trials = {s['n_episodes']} episodes "
                 f"({s['n_valid']} valid, excluded: {s['excluded'] or 'none'}; "
                 f"simulator failures: {s.get('simulator_failures', 0)}).")
    lines += ["", "| k | pass^k (%) | 95% CI |", "|---|---|---|"]
    for k, v in s["pass_hat_k"].items():
        ci = s["pass_hat_k_ci95"].get(k)
        lines.append(f"| {k} | {pct(v)} | {pct(ci[0]) + '-' + pct(ci[1]) if ci else '-'} |")
    ci = s.get("tcr_ci95")
    lines += ["", f"TCR: {pct(s['tcr'])}% (95% CI {pct(ci[0]) + '-' + pct(ci[1]) if ci else '-'}); "
              f"average turns {s['avg_turns']}, tool calls {s['avg_tool_calls']}; "
              f"episode p50 {s.get('episode_ms_p50')} ms.", ""]
    lines += ["| tag | n | pass^1 (%) | TCR (%) |", "|---|---|---|---|"]
    for tag, v in s["by_tag"].items():
        lines.append(f"| {tag} | {v['n']} | {pct(v['pass_hat_k'].get('1'))} | {pct(v.get('tcr'))} |")
    lines += ["", "Tool calls: " + ", ".join(f"{k} {v}" for k, v in s["tool_histogram"].items()), ""]
    if s.get("failure_causes"):
        lines += ["| why failed episodes failed | episodes |", "|---|---|"]
        lines += [f"| {cause} | {n} |" for cause, n in s["failure_causes"].items()]
        lines.append("")
    return "\n".join(lines)
