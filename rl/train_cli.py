"""`muarl train`: build a tiny model, cold-start SFT and GRPO with simulated customers, from the shell.

- `init --corpus FILE.jsonl --out DIR`: a BPE tokenizer trained on the corpus's conversations and a
  randomly initialised tiny Qwen3 (sizes from `--recipe`), saved as a model folder with a manifest;
- `sft --model DIR --data FILE.jsonl --out DIR`: cold-start SFT (loss on assistant tokens only);
- `grpo --model DIR --tasks FILE --out DIR [--user scripted|scripted-static]`: GRPO on sandboxes with
  the simulated customer; checkpoints under OUT/checkpoints, resumed when the command is run again.
The recipe (`--recipe cpu-tiny` by default) supplies the chat view, system prompt and sizes; options
override its hyper-parameters. Progress is shown with rich bars; bad input exits with code 2.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rl.chat.views import ChatView

train_app = typer.Typer(help="Train local models (tokenizer + tiny Qwen3, SFT, GRPO).", no_args_is_help=True)
console = Console(stderr=True)
RecipeOpt = Annotated[str, typer.Option("--recipe", help="experiment recipe for view, prompt and sizes")]


def register(app: typer.Typer) -> None:
    app.add_typer(train_app, name="train")


def _recipe(name: str):
    from rl.experiment.recipe import get_recipe

    try:
        return get_recipe(name)
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None


def _records(path: Path) -> list[dict]:
    from rl.coldstart.sft import read_records

    try:
        recs = read_records(path)
        if not recs or not all(isinstance(r, dict) and isinstance(r.get("messages"), list) for r in recs):
            raise ValueError("expected JSONL records with a 'messages' list")
        return recs
    except (OSError, ValueError) as e:
        console.print(f"[red]error:[/red] {path}: {e}")
        raise typer.Exit(2) from None


def _bar(label: str) -> Progress:
    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[info]}"),
                    TimeElapsedColumn(), console=console)


@train_app.command("init")
def init(corpus: Annotated[Path, typer.Option("--corpus", help="cold-start JSONL whose conversations train the BPE")],
         out: Annotated[Path, typer.Option("--out", help="model folder to write")],
         recipe: RecipeOpt = "cpu-tiny",
         vocab_size: Annotated[int | None, typer.Option("--vocab-size", min=300)] = None) -> None:
    """Train a BPE tokenizer and build a randomly initialised tiny Qwen3."""
    from rl.chat.format import render_conversation
    from rl.models.tiny import build_tiny_model, n_parameters, save_model_folder
    from rl.models.tokenizer import train_bpe

    r = _recipe(recipe)
    records = _records(corpus)
    view = r.view_with_names(records)
    texts = [render_conversation(**view.record(x)) for x in records]
    tok = train_bpe(texts, vocab_size=vocab_size or r.vocab_size, extra_tokens=view.extra_tokens)
    model = build_tiny_model(tok, r.model)
    save_model_folder(model, tok, out, {"kind": "tiny-qwen3", "recipe": r.model.model_dump(), "parent": None,
                                        "tokenizer": {"vocab_size": len(tok), "corpus": str(corpus)},
                                        "view": view.describe()})
    console.print(f"{n_parameters(model):,} parameters, vocabulary {len(tok)} -> {out}")


@train_app.command("sft")
def sft(model_dir: Annotated[Path, typer.Option("--model", help="model folder to start from")],
        data: Annotated[Path, typer.Option("--data", help="cold-start JSONL (filtered)")],
        out: Annotated[Path, typer.Option("--out", help="model folder to write")],
        recipe: RecipeOpt = "cpu-tiny",
        epochs: Annotated[float | None, typer.Option("--epochs", min=0.01)] = None,
        lr: Annotated[float | None, typer.Option("--lr", min=0.0)] = None,
        batch_size: Annotated[int | None, typer.Option("--batch-size", min=1)] = None) -> None:
    """Cold-start SFT with the loss on assistant tokens only (plus the recipe's counterfactual and
    augmented copies of the conversations)."""
    from rl.coldstart.augment import sft_training_records
    from rl.coldstart.sft import sft_train
    from rl.models.tiny import load_model_folder, save_model_folder

    r = _recipe(recipe)
    cfg = r.sft.model_copy(update={k: v for k, v in {"epochs": epochs, "lr": lr, "batch_size": batch_size}.items()
                                   if v is not None})
    if not model_dir.is_dir():
        console.print(f"[red]error:[/red] no model folder at {model_dir}")
        raise typer.Exit(2)
    model, tok, manifest = load_model_folder(model_dir)
    view = ChatView.from_manifest(manifest.get("view"))  # the layout the model was made for
    training = sft_training_records(_records(data), counterfactuals=r.sft_reason_counterfactuals,
                                    augment_copies=r.sft_augment_copies, seed=r.task_seed)
    records = [view.record(x) for x in training]
    total = max(1, round(math.ceil(len(records) / cfg.batch_size) * cfg.epochs))
    with _bar("sft") as bar:
        task = bar.add_task("sft", total=total, info="")
        history = sft_train(model, tok, records, cfg,
                            on_step=lambda m: bar.update(task, advance=1, info=f"loss {m['loss']:.3f}"))
    keep = {k: v for k, v in manifest.items() if k not in ("created", "parameters", "architecture")}
    save_model_folder(model, tok, out, {**keep, "parent": str(model_dir),
                                        "training": {"method": "sft", "config": cfg.model_dump(), "data": str(data),
                                                     "final_loss": history[-1]["loss"]}})
    console.print(f"final loss {history[-1]['loss']:.4f} -> {out}")


@train_app.command("grpo")
def grpo(model_dir: Annotated[Path, typer.Option("--model", help="model folder to start from")],
         tasks_file: Annotated[Path, typer.Option("--tasks", help="RL task file")],
         out: Annotated[Path, typer.Option("--out", help="run folder (metrics, checkpoints, final model)")],
         user: Annotated[str, typer.Option("--user", help="scripted or scripted-static")] = "scripted",
         recipe: RecipeOpt = "cpu-tiny",
         steps: Annotated[int | None, typer.Option("--steps", min=1)] = None,
         lr: Annotated[float | None, typer.Option("--lr", min=0.0)] = None,
         mini_batches: Annotated[int | None, typer.Option("--mini-batches", min=1,
                                                          help="optimizer steps per rollout batch")] = None,
         ppo_epochs: Annotated[int | None, typer.Option("--ppo-epochs", min=1,
                                                        help="passes over each rollout batch")] = None,
         loss_agg: Annotated[str | None, typer.Option(
             "--loss-agg", help="token-mean or seq-mean-token-mean (verl's loss_agg_mode)")] = None,
         database_url: Annotated[str | None, typer.Option("--database-url", help="Postgres for sandboxes")] = None,
         data_dir: Annotated[Path | None, typer.Option("--data-dir", help="benchmarks folder")] = None) -> None:
    """GRPO with simulated customers on sandboxes (resumes from OUT/checkpoints)."""
    from rl.env.episode import EpisodeLimits
    from rl.experiment.environment import ExperimentEnv
    from rl.grpo.rollout import EpisodeRollout
    from rl.grpo.trainer import GRPOTrainer
    from rl.models.tiny import load_model_folder, save_model_folder
    from rl.simulator.base import make_user
    from rl.tasks.schema import TaskFileError, load_tasks
    from rl.tasks.stores import resolve_store

    r = _recipe(recipe)
    from rl.grpo.algorithm import LOSS_AGG_MODES

    if loss_agg is not None and loss_agg not in LOSS_AGG_MODES:
        console.print(f"[red]error:[/red] --loss-agg must be one of {', '.join(LOSS_AGG_MODES)}")
        raise typer.Exit(2)
    given = {"steps": steps, "lr": lr, "mini_batches": mini_batches, "ppo_epochs": ppo_epochs, "loss_agg": loss_agg}
    cfg = r.grpo.model_copy(update={k: v for k, v in given.items() if v is not None})
    try:
        tasks = load_tasks(tasks_file)
        refs = {t.snapshot for t in tasks}
        if len(refs) != 1:
            raise ValueError(f"tasks must share one store, found {sorted(refs)}")
        sim = make_user(user)
        if not model_dir.is_dir():
            raise ValueError(f"no model folder at {model_dir}")
    except (TaskFileError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    model, tok, manifest = load_model_folder(model_dir)
    ref = refs.pop()
    with ExperimentEnv(database_url, resolve_store(ref, data_dir), ref, r.pool_size) as env, _bar("grpo") as bar:
        rollout = EpisodeRollout(tok, env.loop, env.pool, env.cache, sim,
                                 max_new_tokens=r.max_new_tokens, max_context=r.max_context,
                                 temperature=cfg.temperature, view=ChatView.from_manifest(manifest.get("view")),
                                 limits=EpisodeLimits(max_turns=r.max_turns), concurrency=r.rollout_concurrency,
                                 seed=cfg.seed)
        trainer = GRPOTrainer(model, tok, tasks, rollout, cfg, out, manifest={**manifest, "user": user})
        task = bar.add_task("grpo", total=cfg.steps, completed=trainer.step, info="")
        trainer.run(on_step=lambda m: bar.update(task, advance=1, info=f"reward {m['reward_mean']:.2f}"))
    keep = {k: v for k, v in manifest.items() if k not in ("created", "parameters", "architecture")}
    save_model_folder(model, tok, out / "model", {**keep, "parent": str(model_dir),
                                                  "training": {"method": "grpo", "user": user,
                                                               "config": cfg.model_dump()}})
    console.print(f"done: {cfg.steps} steps -> {out / 'model'}")
