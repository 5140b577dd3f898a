"""`muarl tau`: run tau-bench retail tasks and tool calls through muarl's own tools and reward.

Both commands load `DIR/tau1/retail/{users,orders,products}.json` into a fresh snapshot on the
store's server (`DATABASE_URL`, else the embedded PostgreSQL), work in sandboxes copied from it
in upstream-compatible mode as staff, and drop every database they made on the way out, also
on errors, Ctrl-C and SIGTERM.

- `replay`: for each task of `tasks_<split>.json`, in order, replays its gold actions (terminal
  tools included, which change nothing) in a fresh sandbox and writes one JSON line
  `{"index", "reward", "outputs", "changes"}`. The reward is our reward against the task's own
  gold state, replayed independently on another fresh sandbox (terminal tools skipped, as
  tau-bench does), with the task's required outputs stated by the replaying oracle: it should
  be 1.0 for every task.
- `call`: runs each line `{"name", "arguments"}` of a file in order on one sandbox (state carries
  over) and writes `{"output": text}` per line: the exact text the model would see.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import AsyncIterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from backend.config import get_settings
from backend.store.tau_data import StoreData, read_tau_retail, retail_dir
from rl.env import GoldSpec, GoldStateCache, SandboxPool, Snapshot, create_snapshot, drop_snapshot, score
from rl.env.gold import ensure_tools_registered, replay_actions
from rl.env.sandbox import temporary_sandbox

tau_app = typer.Typer(help="Check muarl's tools and reward against tau-bench.", no_args_is_help=True)
console = Console(stderr=True)


class Split(StrEnum):
    train = "train"
    test = "test"
    dev = "dev"


Domain = Annotated[str, typer.Option("--domain", help="tau-bench domain (only 'retail')")]
DataDir = Annotated[Path | None, typer.Option("--data-dir", help="benchmarks folder (default MUARL_BENCHMARKS_DIR)")]
Out = Annotated[Path, typer.Option("--out", help="JSON-lines output file")]


def register(app: typer.Typer) -> None:
    app.add_typer(tau_app, name="tau")


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


def _read_store(domain: str, data_dir: Path | None) -> tuple[Path, StoreData]:
    if domain != "retail":
        raise _fail(f"domain {domain!r} is not supported (only 'retail')")
    folder = Path(data_dir or get_settings().benchmarks_dir)
    try:
        return folder, read_tau_retail(folder)
    except (FileNotFoundError, ValueError) as e:
        raise _fail(str(e)) from None


def _run(main: Any) -> Any:
    """Run a coroutine; SIGTERM cancels it like Ctrl-C does, so its cleanup always runs."""

    async def guarded() -> Any:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        return await main

    try:
        return asyncio.run(guarded())
    except (KeyboardInterrupt, asyncio.CancelledError):
        console.print("[yellow]interrupted[/yellow]: every database made by this run was dropped")
        raise typer.Exit(130) from None


@contextlib.asynccontextmanager
async def tau_snapshot(data: StoreData) -> AsyncIterator[Snapshot]:
    """A snapshot of `data` on the store's server, dropped on exit."""
    from backend.db.engine import database_url

    snap = await create_snapshot(database_url(), data)
    try:
        yield snap
    finally:
        await asyncio.shield(drop_snapshot(snap))


# ---------------------------------------------------------------------------- replay


@tau_app.command("replay")
def replay(
    out: Out,
    split: Annotated[Split, typer.Option("--split", help="task split")],
    domain: Domain = "retail",
    data_dir: DataDir = None,
    concurrency: Annotated[int, typer.Option(min=1, max=32, help="tasks replayed at once")] = 4,
) -> None:
    """Replay each task's gold actions in a fresh sandbox; one JSON line per task."""
    folder, data = _read_store(domain, data_dir)
    tasks_path = retail_dir(folder) / f"tasks_{split.value}.json"
    try:
        tasks = json.loads(tasks_path.read_text())
    except (OSError, ValueError) as e:
        raise _fail(f"cannot read {tasks_path}: {e}") from None
    if not isinstance(tasks, list):
        raise _fail(f"{tasks_path} is not a list of tasks")
    rewards = _run(_replay(data, tasks, split.value, out, concurrency))
    perfect = sum(1 for r in rewards if r == 1.0)
    console.print(f"{perfect}/{len(rewards)} tasks scored 1.0; wrote {out}")


async def _replay(data: StoreData, tasks: list[dict], split: str, out: Path, concurrency: int) -> list[float]:
    lines: list[str | None] = [None] * len(tasks)
    rewards: list[float] = [0.0] * len(tasks)
    async with tau_snapshot(data) as snap:
        pool = await SandboxPool(snap, size=min(2 * concurrency, 16)).start()
        try:
            cache = GoldStateCache()
            queue: asyncio.Queue[int] = asyncio.Queue()
            for i in range(len(tasks)):
                queue.put_nowait(i)

            with _progress() as progress, out.open("w") as fh:
                bar = progress.add_task(f"replay {split}", total=len(tasks))
                written = 0

                async def worker() -> None:
                    nonlocal written
                    while not queue.empty():
                        i = queue.get_nowait()
                        rewards[i], lines[i] = await _replay_task(pool, cache, split, i, tasks[i])
                        progress.advance(bar)
                        while written < len(lines) and lines[written] is not None:
                            fh.write(lines[written] + "\n")
                            written += 1
                        fh.flush()

                await asyncio.gather(*(worker() for _ in range(concurrency)))
        finally:
            await asyncio.shield(pool.close())
    return rewards


async def _replay_task(pool: SandboxPool, cache: GoldStateCache, split: str, index: int,
                       task: Any) -> tuple[float, str]:
    task = task if isinstance(task, dict) else {}
    gold = GoldSpec.from_tau_task(f"tau1/retail/{split}/{index}", task)
    async with pool.sandbox() as sb, sb.rolled_back():  # rolled back: the sandbox serves the next task
        results = await replay_actions(sb, gold.actions, upstream_compat=True, skip_terminal=False)
        changes = await sb.changed_records()
        # the replaying oracle states the task's required outputs in its final message
        breakdown = await score(sb, gold, list(gold.outputs), cache=cache, upstream_compat=True)
    if breakdown.reward != 1.0:
        console.print(f"[yellow]task {index}[/yellow]: reward 0: {breakdown.explain()}")
    line = {
        "index": index,
        "reward": breakdown.reward,
        "outputs": [r.output if r is not None else "" for r in results],
        "changes": changes,
    }
    return breakdown.reward, json.dumps(line)


def _progress() -> Progress:
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False)


# ---------------------------------------------------------------------------- call


@tau_app.command("call")
def call(
    calls: Annotated[Path, typer.Option("--calls", help='JSON-lines file of {"name": ..., "arguments": {...}}')],
    out: Out,
    domain: Domain = "retail",
    data_dir: DataDir = None,
) -> None:
    """Run tool calls in order on one fresh sandbox; one {"output": text} line per call."""
    _, data = _read_store(domain, data_dir)
    try:
        raw_lines = calls.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise _fail(f"cannot read {calls}: {e}") from None
    n = _run(_call(data, raw_lines, out))
    console.print(f"ran {n} calls; wrote {out}")


def parse_call(line: str) -> tuple[Any, Any] | str:
    """`(name, arguments)` of a call line, or the `Error: ...` text for a bad line."""
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError) as e:
        return f"Error: invalid JSON call line: {e}"
    if not isinstance(doc, dict):
        return 'Error: a call line must be a JSON object {"name": ..., "arguments": {...}}'
    if "name" not in doc:
        return "Error: the call has no 'name'"
    return doc["name"], doc.get("arguments", {})


async def _call(data: StoreData, raw_lines: list[str], out: Path) -> int:
    from backend.tools.registry import RETAIL

    ensure_tools_registered()
    count = 0
    async with tau_snapshot(data) as snap, temporary_sandbox(snap) as sb:
        ctx = sb.tool_context(upstream_compat=True)
        with out.open("w") as fh:
            for line in raw_lines:
                if not line.strip():
                    continue
                parsed = parse_call(line)
                if isinstance(parsed, str):
                    output = parsed
                else:
                    name, arguments = parsed
                    output = (await RETAIL.call(ctx, name, arguments)).output
                fh.write(json.dumps({"output": output}) + "\n")
                count += 1
    return count
