"""The cycle's gate step: play the candidate and the champion on the cycle's gate suite (the same
tasks, the same scripted customers, greedy, on sandboxes of the cycle's snapshot) and decide.

Checks (each with value, threshold, pass/fail in the report):
- `floor` (no champion): the candidate's pass^1 reaches the recipe's floor (`gate_floor`, 0 if the
  recipe names none);
- `non_inferior` (with a champion): candidate pass^1 - champion pass^1 >= -margin (0.02);
- `exclusions`: at most 5% of the candidate's episodes excluded for infra or simulator failures.
The report is recorded in the registry (and kept in the cycle's row).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

MARGIN = 0.02
MAX_EXCLUDED = 0.05


def run_cycle_gate(ctx: Any, candidate: str, baseline: str | None) -> dict[str, Any]:
    from rl.chat.views import ChatView
    from rl.experiment.environment import ExperimentEnv
    from rl.experiment.stages import Stages
    from rl.pipeline import models
    from rl.pipeline.steps import load_snapshot, load_task_set, run_async

    recipe = ctx.recipe
    suite = load_task_set(ctx, "gate")
    if not suite:
        raise RuntimeError("the cycle's gate suite is empty")
    out = ctx.folder / "gate"
    rows = {"candidate": Path(ctx.outputs["train"]["model_dir"])}
    if baseline is not None:
        champion = run_async(models.champion(ctx.store_url))
        if champion is None or champion.id != baseline:
            raise RuntimeError(f"the champion changed during the cycle (was {baseline}, now "
                               f"{champion.id if champion else None}); the candidate must be gated against it")
        rows["champion"] = Path(champion.artifact_uri)
    snap = load_snapshot(ctx)
    results: dict[str, dict[str, Any]] = {}
    with ExperimentEnv(ctx.server_url, snap.initial, recipe.store, recipe.pool_size, snapshot=snap) as env:
        st = Stages(recipe, out, env, ctx.reporter)
        ctx.reporter.stages = len(rows)
        for row, source in rows.items():
            target = st.model_dir(row)
            if not (target / "manifest.json").exists():
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(source, target)
            st._view = ChatView.from_manifest(json.loads((target / "manifest.json").read_text()).get("view"))
            results[row] = st.evaluate(row, suite)
    report = decide(results, floor=float(getattr(recipe, "gate_floor", 0.0)), n_tasks=len(suite))
    report.update(candidate=candidate, baseline=baseline, suite=f"cycle:{ctx.cycle_id}:gate", tasks=len(suite))
    run_async(models.record_report(ctx.store_url, candidate, baseline, report, markdown(report), report["suite"]))
    return report


def decide(results: dict[str, dict[str, Any]], *, floor: float, n_tasks: int) -> dict[str, Any]:
    cand = results["candidate"]
    checks = []
    if "champion" in results:
        diff = cand["pass1"] - results["champion"]["pass1"]
        checks.append({"name": "non_inferior", "value": round(diff, 4), "threshold": -MARGIN,
                       "passed": diff >= -MARGIN})
    else:
        checks.append({"name": "floor", "value": cand["pass1"], "threshold": floor, "passed": cand["pass1"] >= floor})
    excluded = cand["excluded"] / max(n_tasks, 1)
    checks.append({"name": "exclusions", "value": round(excluded, 4), "threshold": MAX_EXCLUDED,
                   "passed": excluded <= MAX_EXCLUDED})
    return {"passed": all(c["passed"] for c in checks), "checks": checks,
            "models": {row: {"pass1": r["pass1"], "by_tag": r["by_tag"], "excluded": r["excluded"]}
                       for row, r in results.items()}}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Gate: {report['candidate']} against {report['baseline'] or 'the floor'}", "",
             f"**{'PASSED' if report['passed'] else 'FAILED'}** on {report['tasks']} tasks", "",
             "| check | value | threshold | pass |", "| --- | --- | --- | --- |"]
    lines += [f"| {c['name']} | {c['value']} | {c['threshold']} | {'yes' if c['passed'] else 'no'} |"
              for c in report["checks"]]
    return "\n".join(lines) + "\n"
