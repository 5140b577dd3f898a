"""`muarl verl ...`: prepare a verl GRPO run of real Qwen3 on our episodes (rl/verl/)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

verl_app = typer.Typer(help="Train real Qwen3 with verl on our episodes (GPU clusters).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(verl_app, name="verl")


@verl_app.command("prepare")
def prepare_cmd(
    tasks: Annotated[str, typer.Option("--tasks", help="muarl task file")],
    recipe: Annotated[str, typer.Option("--recipe", help="qwen3-8b, qwen3-14b, qwen3-32b (+ -lora)")],
    out: Annotated[str, typer.Option("--out", help="output folder")],
    val_fraction: Annotated[float, typer.Option("--val-fraction")] = 0.1,
    user: Annotated[str, typer.Option("--user", help="scripted or llm:MODEL")] = "scripted",
    model_path: Annotated[str | None, typer.Option("--model-path", help="model folder (default: the recipe's)")] = None,
    coldstart: Annotated[str | None, typer.Option("--coldstart", help="cold-start JSONL for run_sft.sh")] = None,
) -> None:
    """Write train/val parquet, agent_loops.yaml, run_grpo.sh and run_sft.sh into OUT."""
    from rl.tasks.schema import TaskFileError
    from rl.verl.prepare import prepare

    try:
        summary = prepare(tasks, recipe, out, val_fraction=val_fraction, user=user, model_path=model_path,
                          coldstart=coldstart)
    except (ValueError, TaskFileError, RuntimeError, OSError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(summary))
