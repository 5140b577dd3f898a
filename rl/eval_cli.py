"""`muarl eval`: evaluate a policy on a task file with simulated customers.

`muarl eval --tasks FILE --policy {oracle,oracle:static,hasty,openai:MODEL,local:PATH} --user {scripted,
heldout,scripted-static,llm:MODEL} --trials K --concurrency N --out DIR` writes `DIR/episodes.jsonl` (one
trajectory per line), `DIR/summary.json` and `DIR/summary.md` (see `rl.eval.summary`). LLM endpoints
come from `--base-url` / `--user-base-url` or MUARL_LLM_BASE_URL; sandboxes live on `--database-url`
or the store's server (DATABASE_URL, else the embedded PostgreSQL).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)


def eval_command(
    tasks_file: Annotated[Path, typer.Option("--tasks", help="task file (muarl tasks generate / import-tau)")],
    out: Annotated[Path, typer.Option("--out", help="output folder")],
    policy: Annotated[str, typer.Option("--policy", help="oracle, hasty, openai:MODEL or local:PATH")] = "oracle",
    user: Annotated[str, typer.Option("--user",
                                      help="scripted, varied, wide, heldout, scripted-static, llm:M")] = "scripted",
    trials: Annotated[int, typer.Option("--trials", min=1, help="trials per task (pass^1..pass^K)")] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256)] = 8,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    split: Annotated[str | None, typer.Option("--split", help="only tasks of this split")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="only the first N tasks")] = None,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1)] = 30,
    base_url: Annotated[str | None, typer.Option("--base-url", help="agent's OpenAI-compatible endpoint")] = None,
    user_base_url: Annotated[str | None, typer.Option("--user-base-url", help="simulator's endpoint")] = None,
    database_url: Annotated[str | None, typer.Option("--database-url", help="Postgres server for sandboxes")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="benchmarks folder")] = None,
) -> None:
    """Evaluate a policy on tasks with simulated customers."""
    from rl.env.episode import EpisodeLimits
    from rl.eval.harness import evaluate
    from rl.policies.base import make_policy
    from rl.simulator.base import make_user
    from rl.tasks.schema import TaskFileError, load_tasks

    try:
        tasks = load_tasks(tasks_file)
        if split:
            tasks = [t for t in tasks if t.split == split]
        tasks = tasks[:limit] if limit else tasks
        if not tasks:
            raise ValueError("no tasks selected")
        pol = make_policy(policy, **({"base_url": base_url} if base_url else {}))
        sim = make_user(user, **({"base_url": user_base_url} if user_base_url else {}))
    except (TaskFileError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    with Progress(TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        bar = progress.add_task("episodes", total=len(tasks) * trials)
        result = asyncio.run(evaluate(
            tasks, pol, sim, trials=trials, concurrency=concurrency, server_url=database_url, out_dir=out,
            seed=seed, limits=EpisodeLimits(max_turns=max_turns), data_dir=data_dir,
            on_episode=lambda _t: progress.advance(bar)))
    s = result.summary
    console.print(f"pass^1 {s['pass_hat_k']['1']}  tcr {s['tcr']}  excluded {s['excluded'] or 'none'}  "
                  f"simulator failures {s['simulator_failures']}  -> {out}")
