"""`muarl experiment paper-table --recipe cpu-tiny --out DIR`: the miniature MUA-RL paper table.

Runs rl/experiment/paper_table.py end to end (tasks, cold-start data, base model, SFT, three GRPO
runs, five evaluations) with a rich progress bar per stage, and writes DIR/table.json, DIR/table.md,
DIR/plots/*.png and DIR/failures.md (why failed episodes failed; `muarl experiment failures --out DIR`
recomputes it for a finished folder). Running it again on the same DIR continues an interrupted run.
`--set KEY=VALUE` changes one recipe setting for a variant run (rl/experiment/recipe.py, `with_overrides`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

experiment_app = typer.Typer(help="Experiments that reproduce the paper in miniature.", no_args_is_help=True)
console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.add_typer(experiment_app, name="experiment")


class RichReporter:
    """One progress bar per stage (the experiment's `Reporter`)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task: Any = None

    def stage(self, name: str, total: int | None = None) -> None:
        if self.task is not None:
            self.progress.stop_task(self.task)
        self.task = self.progress.add_task(name, total=total, info="")

    def advance(self, n: int = 1, **info: Any) -> None:
        if self.task is not None:
            text = "  ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in info.items())
            self.progress.update(self.task, advance=n, **({"info": text} if text else {}))

    def lane(self) -> RichReporter:
        """Bars for stages that run in a worker process beside this reporter's."""
        return RichReporter(self.progress)


@experiment_app.command("paper-table")
def paper_table(
    out: Annotated[Path, typer.Option("--out", help="output folder (table.json, table.md, plots, models)")],
    recipe: Annotated[str, typer.Option("--recipe", help="cpu-tiny (the real run) or smoke (toy sizes)")] = "cpu-tiny",
    database_url: Annotated[str | None, typer.Option("--database-url", help="Postgres server for sandboxes")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="benchmarks folder")] = None,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", help="change one recipe setting, KEY=VALUE (repeatable): grpo.steps=36, "
                      'rl_mix=["cancel","shift_cancel_cancel"]; the table names the changed recipe')] = None,
) -> None:
    """Cold start, GRPO with simulated customers and the ablations, evaluated on held-out tasks."""
    from rl.experiment.command import recorded_command
    from rl.experiment.paper_table import Experiment
    from rl.experiment.recipe import get_recipe, with_overrides

    try:
        r = with_overrides(get_recipe(recipe), list(settings or []))
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    import signal

    def _stop(signum: int, _frame: Any) -> None:  # clean up sandboxes and the snapshot on `kill`
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _stop)
    args = sys.argv[1:] if sys.argv[1:2] == ["experiment"] else [
        "experiment", "paper-table", "--recipe", recipe, "--out", str(out)]
    command = recorded_command(args)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console) as progress:
        table = Experiment(r, out, server_url=database_url, data_dir=data_dir, command=command,
                           reporter=RichReporter(progress)).run()
    for name, row in table["rows"].items():
        console.print(f"{name:14s} pass^1 {100 * row['pass1']:5.1f}  TCR {100 * row['tcr']:5.1f}")
    console.print(f"{table['wall_seconds'] / 60:.1f} min -> {out / 'table.md'}")


@experiment_app.command("failures")
def failures(
    out: Annotated[Path, typer.Option("--out", help="a paper-table folder with tasks/eval.json and eval/*/")],
) -> None:
    """Why each row's failed held-out episodes failed: writes DIR/failures.json and DIR/failures.md."""
    from rl.experiment.paper_table import write_failures

    if not (out / "tasks" / "eval.json").exists():
        console.print(f"[red]error:[/red] {out} holds no paper-table run (no tasks/eval.json)")
        raise typer.Exit(2)
    table = write_failures(out)
    if not table:
        console.print(f"[red]error:[/red] {out} holds no evaluation episodes (eval/*/episodes.jsonl)")
        raise typer.Exit(2)
    console.print((out / "failures.md").read_text())
