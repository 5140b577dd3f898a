"""The cycle's gate step: the candidate against the champion on the cycle's gate suite, decided by
the promotion gates (`rl.eval.gates.decide`) and recorded in the registry.

Both models are played in this process (they are local model folders, as `Stages.evaluate`
plays them) on sandboxes of the cycle's snapshot, so the gate suite - generated from that
snapshot - meets exactly the records it was made from: the same tasks, the same trials, the same
scripted customers and episode seeds for both (`rl.eval.gate_run` does the same for versions
served by an engine, on a store it loads itself). The floor (no champion) and the number of
trials come from the recipe; the margin and tolerances from the gate settings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _policy(folder: Path, recipe: Any, name: str) -> Any:
    from rl.chat.views import ChatView
    from rl.models.tiny import load_model_folder
    from rl.policies.local import LocalAgentPolicy, LocalPolicy

    model, tok, manifest = load_model_folder(folder)
    engine = LocalPolicy(model.eval(), tok, greedy=True, max_new_tokens=recipe.max_new_tokens,
                         max_context=recipe.max_context, view=ChatView.from_manifest(manifest.get("view")),
                         max_batch=64)
    return LocalAgentPolicy(engine, model_name=name)


def run_cycle_gate(ctx: Any, candidate: str, baseline: str | None) -> dict[str, Any]:
    """Gate `candidate` against `baseline` (None: the recipe's floor); returns the report."""
    from rl.env.episode import EpisodeLimits
    from rl.eval.gate_run import write_report
    from rl.eval.gate_suite import check_suite
    from rl.eval.gates import GateConfig, decide, to_markdown
    from rl.eval.harness import evaluate
    from rl.pipeline import models
    from rl.pipeline.steps import load_snapshot, load_task_set, run_async
    from rl.simulator.scripted import ScriptedCustomer

    recipe = ctx.recipe
    suite = load_task_set(ctx, "gate")
    check_suite(suite)
    out = ctx.folder / "gate"
    done = out / "gate_report.json"
    if done.exists():  # decided before a crash: record it (once) and return it
        report = json.loads(done.read_text())
    else:
        players = {"candidate": (Path(ctx.outputs["train"]["model_dir"]), candidate)}
        if baseline is not None:
            champion = run_async(models.champion(ctx.store_url))
            if champion is None or champion.id != baseline:
                raise RuntimeError(f"the champion changed during the cycle (was {baseline}, now "
                                   f"{champion.id if champion else None}); the candidate must be gated against it")
            players["champion"] = (Path(champion.artifact_uri), champion.id)
        config = GateConfig.from_settings(trials=recipe.gate_trials, floor=recipe.gate_floor)
        snap = load_snapshot(ctx)
        ctx.reporter.stages = len(players)
        trajectories = {}
        for role, (folder, version) in players.items():
            ctx.reporter.stage(f"gate: {role} {version} on {len(suite)} tasks x {config.trials}",
                               len(suite) * config.trials)
            result = run_async(evaluate(
                suite, _policy(folder, recipe, version), ScriptedCustomer(), trials=config.trials,
                concurrency=recipe.eval_concurrency, server_url=ctx.server_url, seed=config.seed,
                limits=EpisodeLimits(max_turns=recipe.max_turns), snapshots={recipe.store: snap},
                out_dir=out / role, on_episode=lambda _t: ctx.reporter.advance(1)))
            trajectories[role] = result.trajectories
        report = decide(suite, trajectories["candidate"], trajectories.get("champion"), config,
                        meta={"candidate": candidate, "baseline": baseline, "cycle": ctx.cycle_id,
                              "suite": str(ctx.folder / "tasks" / "gate.json"), "user": "scripted"})
        write_report(report, out)
    if "report_id" not in report:
        report["report_id"] = run_async(models.record_report(ctx.store_url, candidate, baseline, report,
                                                             to_markdown(report), report["meta"]["suite"]))
        write_report(report, out)
    return report
