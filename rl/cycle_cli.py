"""`muarl worker`, `muarl beat` and `muarl cycle run / status`: the online cycle from the shell.

- `worker`: the Celery worker that runs cycle steps (queue `muarl`, one step at a time, each in a
  fresh child process); on start it resumes a cycle whose previous worker died;
- `beat`: the scheduler (cycles per `MUARL_CYCLE_SCHEDULE`, the periodic sweep); run exactly one;
- `cycle run [--recipe NAME] [--set KEY=VALUE] [--wait]`: enqueue a cycle; with `--wait`, follow it
  with a progress display (stderr) and exit 0 only if it succeeded. The last line on stdout is one
  JSON object: `cycle_id`, `status`, `candidate`, `gate_passed`, `promoted` (and `error`);
- `cycle status [--json]`: the active cycle and the recent ones.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

cycle_app = typer.Typer(help="The online cycle (snapshot, tasks, train, gate, promote).", no_args_is_help=True)
console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command("worker", help="Run the Celery worker that runs cycle steps.")(worker)
    app.command("beat", help="Run Celery beat: scheduled cycles and the periodic sweep (run exactly one).")(beat)
    app.add_typer(cycle_app, name="cycle")


def _quiet(*, worker: bool = False) -> list[str]:
    """Celery's banners and its running-as-root warning, unless MUARL_LOG_LEVEL=debug: in a
    supervised log (`make run`) they are many lines of noise; as root, one log line says so instead."""
    import os
    import warnings

    from backend.config import get_settings

    if get_settings().log_level.lower() == "debug":
        return []
    from celery.exceptions import SecurityWarning

    warnings.filterwarnings("ignore", category=SecurityWarning)
    if worker and hasattr(os, "geteuid") and os.geteuid() == 0:
        import structlog

        structlog.get_logger("muarl.worker").warning("celery.running_as_root",
                                                     hint="run it as an unprivileged user in production")
    return ["--quiet"]


def worker(loglevel: Annotated[str, typer.Option("--loglevel")] = "INFO",
           hostname: Annotated[str, typer.Option("--hostname", "-n")] = "muarl@%h") -> None:
    from backend.broker import QUEUE
    from rl.pipeline.celery_app import get_app

    get_app().worker_main([*_quiet(worker=True), "worker", "-Q", QUEUE, "--loglevel", loglevel, "--concurrency", "1",
                           "--pool", "prefork", "-n", hostname, "--without-gossip", "--without-mingle"])


def beat(loglevel: Annotated[str, typer.Option("--loglevel")] = "INFO") -> None:
    from backend.config import get_settings
    from rl.pipeline.celery_app import get_app

    var = Path(get_settings().var_dir).resolve() / "beat"
    var.mkdir(parents=True, exist_ok=True)
    # the pid file refuses a second beat on this machine (two would start every cycle twice)
    get_app().start([*_quiet(), "beat", "--loglevel", loglevel, "--schedule", str(var / "schedule"),
                     "--pidfile", str(var / "beat.pid")])


def _engine() -> Any:
    from backend.db.engine import database_url, make_engine

    return make_engine(database_url(), null_pool=True)


async def _read(fn: Any, *args: Any) -> Any:
    engine = _engine()
    try:
        return await fn(engine, *args)
    finally:
        await engine.dispose()


def result_line(c: dict[str, Any]) -> dict[str, Any]:
    """The JSON object `cycle run` ends with."""
    return {"cycle_id": c["cycle_id"], "status": c["status"], "candidate": c["candidate"],
            "gate_passed": c["gate_passed"], "promoted": bool(c["promoted"]), "step": c["step"], "error": c["error"]}


@cycle_app.command("run")
def run(recipe: Annotated[str | None, typer.Option("--recipe", help="recipe (default MUARL_CYCLE_RECIPE)")] = None,
        overrides: Annotated[list[str] | None, typer.Option("--set", help="recipe setting KEY=VALUE")] = None,
        wait: Annotated[bool, typer.Option("--wait", help="follow the cycle to its end")] = False,
        poll_s: Annotated[float, typer.Option("--poll", min=0.1, hidden=True)] = 1.0) -> None:
    """Enqueue a cycle (and with --wait, follow it to the end)."""
    from backend.config import get_settings
    from backend.cycles import CycleBusy, cycle_json, start_cycle
    from rl.experiment.recipe import get_recipe, with_overrides

    name = recipe or get_settings().cycle_recipe
    try:
        with_overrides(get_recipe(name), list(overrides or []))
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    try:
        cycle = asyncio.run(_read(lambda eng: start_cycle(eng, name, overrides=list(overrides or []))))
    except CycleBusy as e:
        console.print(f"[red]error:[/red] a cycle is already active: {e}")
        raise typer.Exit(1) from None
    except Exception as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(1) from None
    state = cycle_json(cycle)
    console.print(f"cycle {cycle.id} queued (recipe {name})")
    if wait:
        state = _follow(cycle.id, poll_s)
    print(json.dumps(result_line(state)), flush=True)
    if wait and state["status"] != "succeeded":
        raise typer.Exit(1)


def _follow(cycle_id: str, poll_s: float) -> dict[str, Any]:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from backend.cycles import cycle_json, get_cycle

    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
                  TextColumn("{task.fields[eta]}"), TimeElapsedColumn(), console=console) as bar:
        task = bar.add_task(cycle_id, total=1.0, eta="")
        while True:
            row = asyncio.run(_read(get_cycle, cycle_id))
            if row is None:
                raise RuntimeError(f"cycle {cycle_id} disappeared")
            c = cycle_json(row)
            p = c["progress"]
            eta = f"~{p['eta_seconds']:.0f}s left in step" if p["eta_seconds"] is not None else ""
            desc = f"{c['status']} {c['step_index'] + (c['status'] != 'succeeded')}/{len(c['steps'])} {c['step']}"
            if p["detail"]:
                desc += f": {p['detail']}"
            bar.update(task, completed=p["overall"], description=desc[:80], eta=eta)
            if c["status"] in ("succeeded", "failed"):
                break
            time.sleep(poll_s)
    if c["status"] == "failed":
        console.print(f"[red]cycle {cycle_id} failed:[/red] {c['error']}")
    else:
        console.print(f"cycle {cycle_id} {c['status']}: candidate {c['candidate']}, gate passed {c['gate_passed']}, "
                      f"promoted {c['promoted']}")
    return c


@cycle_app.command("status")
def status(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
           limit: Annotated[int, typer.Option("--limit", min=1)] = 10) -> None:
    """The active cycle and the most recent ones."""
    from backend.cycles import cycle_json, list_cycles

    rows = [cycle_json(c) for c in asyncio.run(_read(list_cycles, limit))]
    active = next((c for c in rows if c["status"] in ("queued", "running")), None)
    if as_json:
        print(json.dumps({"active": active, "cycles": rows}))
        return
    if not rows:
        console.print("no cycles yet")
        return
    for c in rows:
        p = c["progress"]
        line = f"{c['cycle_id']}  {c['status']:<9} {c['step']:<8} {p['percent']:5.1f}%  recipe {c['recipe']}"
        if c["candidate"]:
            line += f"  candidate {c['candidate']} gate {c['gate_passed']} promoted {c['promoted']}"
        if c["error"]:
            line += f"  error: {c['error']}"
        sys.stdout.write(line + "\n")
