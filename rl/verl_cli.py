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


@verl_app.command("import-checkpoint")
def import_checkpoint_cmd(
    path: Annotated[str, typer.Argument(help="verl checkpoint: .../global_step_N (or its actor/ folder)")],
    out: Annotated[str, typer.Option("--out", help="where the Hugging Face folder is written")],
    name: Annotated[str, typer.Option("--name", help="version name")] = "qwen3-verl",
    recipe: Annotated[str | None, typer.Option("--recipe", help="the recipe it was trained with")] = None,
    parent: Annotated[str | None, typer.Option("--parent", help="version it was trained from")] = None,
    base: Annotated[str | None, typer.Option("--base", help="a LoRA adapter's base version")] = None,
    engine: Annotated[str, typer.Option("--engine", help="vllm or local")] = "vllm",
) -> None:
    """Convert a verl FSDP checkpoint with verl's model merger and register it as a new version
    (prints the version as one JSON object)."""
    from backend.models_cli import _run, actor
    from rl.verl.checkpoint import CheckpointError, import_checkpoint

    if engine not in ("local", "vllm"):
        typer.echo("error: --engine must be vllm or local", err=True)
        raise typer.Exit(2)
    try:
        version = _run(lambda reg: import_checkpoint(path, out, reg, name=name, actor=actor(), recipe=recipe,
                                                     parent=parent, base=base, engine=engine))
    except CheckpointError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    print(json.dumps(version.to_json(), indent=2, default=str))
