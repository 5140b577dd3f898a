"""`muarl tasks`: generate interactive tasks from a store, import tau-bench tasks, check gold plans.

- `generate --store {tau-retail,synthetic} --n N --seed S --out FILE`: tasks of every category and
  variant from the store (the synthetic one is `generate_store(--store-seed, --users)`).
- `import-tau --benchmark {tau1,tau2} --domain retail [--split S] [--data-dir DIR] --out FILE`:
  a task whose gold plan no customer conversation can carry out (a write to another customer's
  records) is left out, named with its reason on stderr and in the file's `meta.left_out`.
- `verify --tasks FILE`: replays every gold plan through the real tools on sandboxes and fails if any
  gold write returns an error.
Task files are written atomically; bad input is a clear error (exit code 2) and nothing is written.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rl.tasks.schema import load_tasks, save_tasks
from rl.tasks.stores import TAU_RETAIL, resolve_store, synthetic_ref

tasks_app = typer.Typer(help="Build task files for episodes and evaluation.", no_args_is_help=True)
console = Console(stderr=True)


class StoreKind(StrEnum):
    tau_retail = "tau-retail"
    synthetic = "synthetic"


class Benchmark(StrEnum):
    tau1 = "tau1"
    tau2 = "tau2"


DataDir = Annotated[Path | None, typer.Option("--data-dir", help="benchmarks folder (default MUARL_BENCHMARKS_DIR)")]


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(2)


@tasks_app.command("generate")
def generate(
    store: Annotated[StoreKind, typer.Option("--store", help="tau-retail or synthetic")],
    out: Annotated[Path, typer.Option("--out", help="task file to write")],
    n: Annotated[int, typer.Option("--n", min=1, help="number of tasks")] = 100,
    seed: Annotated[int, typer.Option("--seed", help="task seed")] = 0,
    users: Annotated[int, typer.Option("--users", min=10, help="synthetic store size")] = 200,
    store_seed: Annotated[int, typer.Option("--store-seed", help="synthetic store seed")] = 0,
    test_fraction: Annotated[float, typer.Option("--test-fraction", min=0.0, max=1.0)] = 0.2,
    split: Annotated[str, typer.Option("--split", help="keep only train, test or all")] = "all",
    data_dir: DataDir = None,
) -> None:
    """Generate tasks of every category and variant from a store snapshot."""
    from rl.tasks.generator import generate_tasks

    if split not in ("all", "train", "test"):
        raise _fail("--split must be train, test or all")
    ref = TAU_RETAIL if store is StoreKind.tau_retail else synthetic_ref(store_seed, users)
    try:
        data = resolve_store(ref, data_dir)
        tasks = generate_tasks(data, n, seed, snapshot=ref, test_fraction=test_fraction)
    except (FileNotFoundError, ValueError) as e:
        raise _fail(str(e)) from None
    if split != "all":
        tasks = [t for t in tasks if t.split == split]
    save_tasks(out, tasks, meta={"generator": "rl.tasks.generator", "store": ref, "seed": seed, "n": n,
                                 "test_fraction": test_fraction, "split": split})
    console.print(f"wrote {len(tasks)} tasks to {out}")


@tasks_app.command("import-tau")
def import_tau(
    benchmark: Annotated[Benchmark, typer.Option("--benchmark", help="tau1 or tau2")],
    out: Annotated[Path, typer.Option("--out", help="task file to write")],
    domain: Annotated[str, typer.Option("--domain", help="tau-bench domain (only retail)")] = "retail",
    split: Annotated[str | None, typer.Option("--split", help="tau1: train/test/dev; tau2: train/test")] = None,
    data_dir: DataDir = None,
) -> None:
    """Import tau-bench retail tasks with scripts derived from their gold actions."""
    from rl.tasks.importers import ImportError_, import_tau1, import_tau2, split_conversational

    if domain != "retail":
        raise _fail(f"only the retail domain can be imported (got {domain!r})")
    if benchmark is Benchmark.tau1 and split not in (None, "train", "test", "dev"):
        raise _fail("tau1 splits are train, test and dev")
    try:
        data = resolve_store(TAU_RETAIL, data_dir)
        if benchmark is Benchmark.tau1:
            tasks = import_tau1(data_dir or _bench_dir(), data, split or "test")
        else:
            tasks = import_tau2(data_dir or _bench_dir(), data, split)
        tasks, left_out = split_conversational(tasks, data)
    except (FileNotFoundError, ImportError_, ValueError, KeyError) as e:
        raise _fail(str(e)) from None
    for task_id, why in left_out.items():
        console.print(f"left out {task_id}: {why}")
    save_tasks(out, tasks, meta={"importer": benchmark.value, "domain": domain, "split": split,
                                 "left_out": left_out})
    console.print(f"wrote {len(tasks)} tasks to {out}" + (f" ({len(left_out)} left out)" if left_out else ""))


@tasks_app.command("verify")
def verify(
    tasks_file: Annotated[Path, typer.Option("--tasks", help="task file")],
    database_url: Annotated[str | None, typer.Option("--database-url", help="server for sandboxes")] = None,
    data_dir: DataDir = None,
) -> None:
    """Replay every task's gold plan through the real tools; fail if a gold write errors."""
    from rl.tasks.schema import TaskFileError
    from rl.tasks.verify import verify_gold

    try:
        tasks = load_tasks(tasks_file)
    except TaskFileError as e:
        raise _fail(str(e)) from None
    problems = asyncio.run(verify_gold(tasks, server_url=database_url, data_dir=data_dir))
    for task_id, message in problems:
        console.print(f"[red]{task_id}[/red]: {message}")
    console.print(f"{len(tasks) - len({p[0] for p in problems})}/{len(tasks)} gold plans replay cleanly")
    if problems:
        raise typer.Exit(1)


def _bench_dir() -> Path:
    from backend.config import get_settings

    return Path(get_settings().benchmarks_dir)
