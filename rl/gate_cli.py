"""`muarl gate`: the promotion gates from the command line.

- `muarl gate run --candidate ID [--baseline champion|ID] --out DIR [--suite FILE] [--trials K]`
  plays the candidate and the champion (or the given baseline) on the gate suite named by the
  candidate's recipe, writes DIR/gate_report.json ("passed", "checks", ...) and DIR/gate_report.md,
  and records the report in the registry. Exit 0 whether the gates passed or not (the report says);
  1 when the gates could not be run (unknown version, no suite, engine down), 2 for bad input.
- `muarl gate suite --store {tau-retail,synthetic} --n N --safety M --seed S --out FILE` writes a
  gate suite: held-out tasks plus the safety suite (`rl.eval.gate_suite`).
"""

from __future__ import annotations

import asyncio
import getpass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True, soft_wrap=True)
gate_app = typer.Typer(help="Promotion gates: candidate vs champion on a held-out suite.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(gate_app, name="gate")


def _actor() -> str:
    try:
        return f"cli:{getpass.getuser()}"
    except Exception:  # no user name in this environment
        return "cli"


@gate_app.command("run")
def gate_run(
    candidate: Annotated[str, typer.Option("--candidate", help="version id to gate")],
    out: Annotated[Path, typer.Option("--out", help="folder for gate_report.json / .md and the episodes")],
    baseline: Annotated[str, typer.Option("--baseline", help="champion (default) or a version id")] = "champion",
    suite: Annotated[Path | None, typer.Option("--suite", help="gate suite (default: the recipe's)")] = None,
    trials: Annotated[int | None, typer.Option("--trials", min=1, help="trials per task (MUARL_GATE_TRIALS)")] = None,
    margin: Annotated[float | None, typer.Option("--margin", min=0.0, help="MUARL_GATE_MARGIN")] = None,
    floor: Annotated[float | None, typer.Option("--floor", min=0.0, max=1.0, help="default: the recipe's")] = None,
    user: Annotated[str, typer.Option("--user", help="scripted, varied, heldout, scripted-static, llm:M")] = "scripted",
    user_base_url: Annotated[str | None, typer.Option("--user-base-url", help="simulator's endpoint")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256)] = 8,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1)] = 30,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="benchmarks folder")] = None,
) -> None:
    """Gate a candidate version against the champion; writes the report and records it."""
    from backend.db.engine import database_url, make_engine
    from backend.serving.artifacts import ArtifactError
    from backend.serving.registry import ModelRegistry, RegistryError
    from rl.env.episode import EpisodeLimits
    from rl.eval.gate_run import gate_versions
    from rl.eval.gates import GateConfig
    from rl.simulator.base import make_user
    from rl.tasks.schema import TaskFileError

    try:
        sim = make_user(user, **({"base_url": user_base_url} if user_base_url else {}))
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    config = GateConfig.from_settings(trials=trials, margin=margin, floor=floor, seed=seed)

    async def main() -> dict:
        engine = make_engine(database_url(), null_pool=True)
        try:
            outcome = await gate_versions(ModelRegistry(engine), candidate, baseline, out_dir=out, user=sim,
                                          actor=_actor(), suite=suite, config=config, concurrency=concurrency,
                                          limits=EpisodeLimits(max_turns=max_turns), data_dir=data_dir)
            return outcome.report
        finally:
            await engine.dispose()

    try:
        report = asyncio.run(main())
    except (RegistryError, ArtifactError, TaskFileError, ValueError, FileNotFoundError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from None
    for check in report["checks"]:
        mark = "[green]pass[/green]" if check["passed"] else "[red]FAIL[/red]"
        console.print(f"{mark} {check['name']}: {check['value']} (threshold {check['threshold']})")
    verdict = "[green]PASSED[/green]" if report["passed"] else "[red]FAILED[/red]"
    console.print(f"gates {verdict}: {out / 'gate_report.json'}, {out / 'gate_report.md'} "
                  f"(report {report.get('report_id')} recorded)")


@gate_app.command("suite")
def gate_suite(
    out: Annotated[Path, typer.Option("--out", help="task file to write")],
    store: Annotated[str, typer.Option("--store", help="tau-retail or synthetic")] = "synthetic",
    n: Annotated[int, typer.Option("--n", min=0, help="held-out regular tasks")] = 40,
    safety: Annotated[int, typer.Option("--safety", min=0, help="safety tasks")] = 12,
    seed: Annotated[int, typer.Option("--seed", help="the training tasks' seed (decides the held-out split)")] = 0,
    users: Annotated[int, typer.Option("--users", min=10, help="synthetic store size")] = 200,
    store_seed: Annotated[int, typer.Option("--store-seed", help="synthetic store seed")] = 0,
    test_fraction: Annotated[float, typer.Option("--test-fraction", min=0.01, max=1.0)] = 0.2,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="benchmarks folder")] = None,
) -> None:
    """Write a gate suite: held-out tasks plus safety tasks."""
    from rl.eval.gate_suite import build_gate_suite
    from rl.tasks.schema import save_tasks
    from rl.tasks.stores import TAU_RETAIL, resolve_store, synthetic_ref

    if store not in ("tau-retail", "synthetic"):
        console.print("[red]error:[/red] --store must be tau-retail or synthetic")
        raise typer.Exit(2)
    ref = TAU_RETAIL if store == "tau-retail" else synthetic_ref(store_seed, users)
    try:
        tasks = build_gate_suite(resolve_store(ref, data_dir), snapshot=ref, n=n, n_safety=safety, seed=seed,
                                 test_fraction=test_fraction)
    except (FileNotFoundError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    save_tasks(out, tasks, meta={"generator": "rl.eval.gate_suite", "store": ref, "seed": seed, "n": n,
                                 "safety": safety, "test_fraction": test_fraction})
    console.print(f"wrote {len(tasks)} gate tasks ({safety} safety) to {out}")
