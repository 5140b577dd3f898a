"""`muarl experiment paper-table --recipe cpu-tiny --out DIR`: the miniature MUA-RL paper table.

Runs rl/experiment/paper_table.py end to end (tasks, cold-start data, base model and SFT once, then
the GRPO runs for each seed and the ablations, and every model's evaluation with each evaluation
customer) with a rich progress bar per stage, and writes DIR/table.json, DIR/table.md,
DIR/plots/*.png and DIR/failures.md (why failed episodes failed; `muarl experiment failures --out DIR`
recomputes it for a finished folder). Running it again on the same DIR continues an interrupted run.
`--set KEY=VALUE` changes one recipe setting for a variant run (rl/experiment/recipe.py, `with_overrides`):
`--set eval_set=dev` evaluates on the development set (for recipe decisions), `--set task_seed=S` is
another experiment with its own task sets; `--seeds N` is `--set seeds=N`.
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
    seeds: Annotated[int | None, typer.Option(
        "--seeds", min=1, help="GRPO seeds of MUA-RL from the one cold start (recipe `seeds`, 3)")] = None,
) -> None:
    """Cold start, GRPO with simulated customers for several seeds and the ablations, evaluated on
    the frozen test set with the training-style and the held-out customer."""
    from rl.experiment.command import recorded_command
    from rl.experiment.paper_table import Experiment, StaleRunFolder
    from rl.experiment.recipe import get_recipe, with_overrides

    try:
        r = with_overrides(get_recipe(recipe), [*(settings or []), *([f"seeds={seeds}"] if seeds else [])])
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
        try:
            table = Experiment(r, out, server_url=database_url, data_dir=data_dir, command=command,
                               reporter=RichReporter(progress)).run()
        except StaleRunFolder as e:
            console.print(f"[red]error:[/red] {e}")
            raise typer.Exit(2) from None
    for name, row in table["rows"].items():
        console.print(f"{name:14s} pass^1 {100 * row['pass1']:5.1f}  TCR {100 * row['tcr']:5.1f}  "
                      f"({row['n_seeds']} seed{'s' if row['n_seeds'] > 1 else ''})")
    if table["gain_mean"] is not None:
        lo, hi = table["gain_ci95"]
        console.print(f"MUA-RL - cold start ({table['eval_customer']} customer): "
                      + ", ".join(f"seed {s['seed']} {100 * s['gain']:+.1f}" for s in table["seeds"])
                      + f"; mean {100 * table['gain_mean']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
    console.print(f"{table['wall_seconds'] / 60:.1f} min -> {out / 'table.md'}")


@experiment_app.command("failures")
def failures(
    out: Annotated[Path, typer.Option("--out", help="a paper-table folder with recipe.json, tasks/ and eval/*/")],
) -> None:
    """Why each model's failed evaluation episodes failed: writes DIR/failures.json and DIR/failures.md."""
    from rl.experiment.paper_table import write_failures

    if not (out / "recipe.json").exists() or not (out / "tasks").is_dir():
        console.print(f"[red]error:[/red] {out} holds no paper-table run (no recipe.json and tasks/)")
        raise typer.Exit(2)
    table = write_failures(out)
    if not table:
        console.print(f"[red]error:[/red] {out} holds no evaluation episodes (eval/*/episodes.jsonl)")
        raise typer.Exit(2)
    console.print((out / "failures.md").read_text())
