"""The paper experiment's GRPO runs and evaluations, scheduled by their dependencies and run side
by side in worker processes: once the base model and the cold start exist, `workers` processes take
the stages left (a GRPO run per row and seed, an evaluation per model) in dependency order, the
stage with the longest chain of work behind it first, since one tiny model's batched decoding leaves
part of the machine idle. Each worker has `threads // workers` torch threads, its own snapshot, sandbox pool and
event loop, and a share of the server's connections (rl/env/sandbox.py `sandbox_share`), never more
than it can use (`sandboxes_needed`), so that later jobs on the same server get theirs; with one
worker the same schedule runs in the calling process. Finished stages are never rerun, so an
interrupted run continues; a failing stage stops the run, the other workers are terminated (they
drop their sandboxes and snapshots) and the error names the stage with the worker's traceback."""


from __future__ import annotations

import queue
import signal
import time
import traceback
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path
from types import FrameType
from typing import Any

import structlog

from rl.experiment.environment import ExperimentEnv
from rl.experiment.plan import (
    GRPO_RUNS,
    ROWS,
    Reporter,
    TaskSets,
    grpo_customer,
    grpo_runs,
    run_named,
    task_set_names,
)
from rl.experiment.recipe import ExperimentRecipe
from rl.experiment.stages import Stages

log = structlog.get_logger(__name__)
# A stage's weight when choosing what to start next: a GRPO run of cpu-tiny takes 600-1100 s, one
# greedy evaluation of 105 tasks with one customer 40-80 s; a trial more costs about half as much.
GRPO_COST = 10.0


def sandboxes_needed(recipe: ExperimentRecipe) -> int:
    """The most sandboxes (one server connection each) one worker uses at once: a GRPO step's
    rollouts plus its pool's spares, or the evaluation harness's two per concurrent episode (the
    worker's own pool is released meanwhile). A worker takes no more than this of the server's
    connections, leaving the rest to other jobs on the same server."""
    return max(recipe.rollout_concurrency + recipe.pool_size, 2 * recipe.eval_concurrency)


def evaluation_cost(trials: int, customers: int) -> float:
    return customers * (1.0 + 0.5 * (trials - 1))


@dataclass(frozen=True)
class Job:
    stage: str  # grpo_<run> or eval_<model> (rl/experiment/plan.py `result_marker`)
    needs: str  # the stage whose result it starts from
    cost: float = 1.0
    also: tuple[str, ...] = ()  # stages it waits for besides its input

    @property
    def inputs(self) -> tuple[str, ...]:
        return (self.needs, *self.also)


def training_and_evaluation_jobs(recipe: ExperimentRecipe, customers: int = 1) -> list[Job]:
    """The stages after SFT, each with the stage it needs: every GRPO run (plan.py `grpo_runs`) and
    the evaluation of every model, with `customers` evaluation customers."""
    ev = evaluation_cost(recipe.eval_trials, customers)
    jobs = []
    for row in ROWS:
        if row in GRPO_RUNS:
            needs = "sft" if GRPO_RUNS[row][0] == "cold_start" else "base_model"
            for run in (r for r in grpo_runs(recipe) if r.row == row):
                jobs.append(Job(f"grpo_{run.name}", needs, GRPO_COST))
                # a run from the base waits for the base's evaluation: when GRPO left the weights as
                # they were (no reward, no step), that evaluation is its own (stages.py `evaluate`)
                also = ("eval_base",) if GRPO_RUNS[row][0] == "base" else ()
                jobs.append(Job(f"eval_{run.name}", f"grpo_{run.name}", ev, also))
        else:
            jobs.append(Job(f"eval_{row}", "sft" if row == "cold_start" else "base_model", ev))
    return jobs


def chain_cost(jobs: list[Job], stage: str) -> float:
    """`stage`'s cost plus that of the longest chain of jobs that wait for it."""
    after = [j.stage for j in jobs if stage in j.inputs]
    own = next(j.cost for j in jobs if j.stage == stage)
    return own + max((chain_cost(jobs, s) for s in after), default=0.0)


def next_job(jobs: list[Job], finished: set[str], started: set[str]) -> Job | None:
    """The ready job (its inputs finished, itself not started) with the longest chain behind it;
    ties go to the earlier job in `jobs`."""
    ready = [j for j in jobs if set(j.inputs) <= finished and j.stage not in started and j.stage not in finished]
    return max(ready, key=lambda j: chain_cost(jobs, j.stage), default=None)


def run_stage(st: Stages, stage: str, tasks: TaskSets) -> None:
    """Run one job's stage with the `Stages` object `st`."""
    kind, _, name = stage.partition("_")
    if kind == "grpo":
        run = run_named(st.recipe, name)
        st.grpo(name, GRPO_RUNS[run.row][0], grpo_customer(st.recipe, run.row),
                tasks["rl"], tasks.get("val"), seed=run.seed)
    else:
        st.evaluate(name, tasks[st.recipe.eval_set])


def run_in_process(st: Stages, jobs: list[Job], finished: set[str], tasks: TaskSets) -> dict[str, float]:
    """The schedule with one worker: this process, one stage after the other. Returns seconds per stage."""
    finished, seconds = set(finished), {}
    while (job := next_job(jobs, finished, set())) is not None:
        t0 = time.perf_counter()
        run_stage(st, job.stage, tasks)
        seconds[job.stage] = time.perf_counter() - t0
        finished.add(job.stage)
    return seconds


# What a worker tells the parent: ("stage", worker, name, total), ("advance", worker, n, info),
# ("done", worker, stage, seconds) or ("failed", worker, stage or None, traceback).
WorkerEvent = tuple[str, int, Any, Any]


class _QueueReporter:
    """A worker's progress, sent to the parent process, which shows it. At each report it also takes
    the torch thread count the parent now gives it (`threads[index]`): a worker left alone on the
    machine, the others idle, uses every core for the rest of its stage."""

    def __init__(self, index: int, events: Queue[WorkerEvent], threads: Any = None) -> None:
        self.index, self.events, self.threads = index, events, threads
        self._using = 0
        self.take_threads()

    def take_threads(self) -> None:
        if self.threads is None or self.threads[self.index] == self._using:
            return
        import torch

        self._using = self.threads[self.index]
        torch.set_num_threads(self._using)

    def lane(self) -> _QueueReporter:
        return self

    def stage(self, name: str, total: int | None = None) -> None:
        self.take_threads()
        self.events.put(("stage", self.index, name, total))

    def advance(self, n: int = 1, **info: Any) -> None:
        self.take_threads()
        self.events.put(("advance", self.index, n, info))


def _raise_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds the worker's environment: sandboxes and snapshot dropped


def _worker(index: int, recipe_json: str, out: str, server_url: str | None, data_dir: str | None, threads: Any,
            max_sandboxes: int, customers: list[str], inbox: Queue[str | None], events: Queue[WorkerEvent]) -> None:
    """One worker process: its own environment, then stages from `inbox` until it reads None."""
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    stage = None
    try:
        import torch

        from rl.tasks.schema import load_tasks
        from rl.tasks.stores import resolve_store

        torch.set_num_threads(threads[index])
        recipe = ExperimentRecipe.model_validate_json(recipe_json)
        folder = Path(out)
        tasks = {n: load_tasks(folder / "tasks" / f"{n}.json") for n in task_set_names(recipe) if n != "cold_start"}
        data = resolve_store(recipe.store, Path(data_dir) if data_dir else None)
        with ExperimentEnv(server_url, data, recipe.store, recipe.pool_size, max_sandboxes=max_sandboxes) as env:
            st = Stages(recipe, folder, env, _QueueReporter(index, events, threads), customers)
            while (stage := inbox.get()) is not None:
                t0 = time.perf_counter()
                run_stage(st, stage, tasks)
                events.put(("done", index, stage, time.perf_counter() - t0))
    except BaseException:
        events.put(("failed", index, stage, traceback.format_exc()))
        raise SystemExit(1) from None


class StageFailed(RuntimeError):
    """A stage failed in a worker process; the message carries the worker's traceback."""


def run_in_workers(recipe: ExperimentRecipe, out: Path, jobs: list[Job], finished: set[str], *,
                   server_url: str | None, data_dir: Path | None, reporter: Reporter,
                   customers: list[str]) -> dict[str, float]:
    """The schedule on `recipe.workers` processes (fewer when fewer stages are left), evaluating with
    `customers`. Returns the seconds each stage took in its worker."""
    import asyncio
    import multiprocessing

    from backend.db.engine import database_url, normalize_url
    from rl.env.ownership import sweep_orphan_databases
    from rl.env.sandbox import sandbox_share

    finished = set(finished)
    left = [j for j in jobs if j.stage not in finished]
    n = min(recipe.workers, len(left))
    if n == 0:
        return {}
    url = normalize_url(server_url) if server_url else database_url()
    need = sandboxes_needed(recipe)
    share = min(asyncio.run(sandbox_share(url, n)), need)
    threads = max(1, recipe.threads // n)
    log.info("experiment.workers", workers=n, threads=threads, sandboxes_each=share, stages=len(left))
    if share < need:
        log.warning("experiment.few_sandboxes", sandboxes_each=share, needed_each=need,
                    hint="other jobs hold most of the database server's connections: each worker runs "
                         f"{share} episodes at a time instead of {need}, so rollouts and evaluations are slower; "
                         "raise the server's max_connections or wait for the other jobs")
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited torch threads or event loop
    # torch threads per worker, shared with the workers: the busy ones split `recipe.threads`
    shares = ctx.Array("i", [threads] * n, lock=False)
    events = ctx.Queue()
    inboxes = [ctx.Queue() for _ in range(n)]
    procs = [ctx.Process(target=_worker, name=f"paper-table-worker-{i}", args=(
        i, recipe.model_dump_json(), str(out), url, str(data_dir) if data_dir else None, shares, share,
        customers, inboxes[i], events)) for i in range(n)]
    lanes = [reporter.lane() for _ in range(n)]
    busy: dict[int, str | None] = dict.fromkeys(range(n))
    started: set[str] = set()
    seconds: dict[str, float] = {}
    try:
        for p in procs:
            p.start()
        while True:
            for i in range(n):
                if busy[i] is None and (job := next_job(jobs, finished, started)) is not None:
                    busy[i] = job.stage
                    started.add(job.stage)
                    inboxes[i].put(job.stage)
            if not any(busy.values()):
                break
            working = [i for i in range(n) if busy[i]]
            for i in working:
                shares[i] = max(1, recipe.threads // len(working))
            try:
                event = events.get(timeout=1.0)
            except queue.Empty:
                dead = [i for i, p in enumerate(procs) if busy[i] and not p.is_alive()]
                if dead:
                    raise StageFailed(f"stage {busy[dead[0]]} failed: worker {dead[0]} exited with code "
                                      f"{procs[dead[0]].exitcode}") from None
                continue
            kind, i = event[0], event[1]
            if kind == "stage":
                lanes[i].stage(event[2], event[3])
            elif kind == "advance":
                lanes[i].advance(event[2], **event[3])
            elif kind == "done":
                seconds[event[2]] = event[3]
                finished.add(event[2])
                busy[i] = None
            else:
                raise StageFailed(f"stage {event[2] or '(worker start-up)'} failed in worker {i}:\n{event[3]}")
        for inbox in inboxes:
            inbox.put(None)
        for p in procs:
            p.join(timeout=120)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()  # SIGTERM: the worker drops its sandboxes and snapshot, then exits
        for p in procs:
            if p.pid is not None:
                p.join(timeout=60)
            if p.is_alive():
                p.kill()
                p.join(timeout=10)
        if any(p.exitcode != 0 for p in procs if p.pid is not None):
            # a worker killed before it could unwind (a loaded machine: past the 60 s above) leaves
            # its sandboxes and snapshot behind; its owner lock died with it, so they are orphans
            try:
                asyncio.run(sweep_orphan_databases(url))
            except Exception as e:  # never hide the stage's own error behind the clean-up's
                log.warning("experiment.sweep_failed", error=str(e))
    return seconds
