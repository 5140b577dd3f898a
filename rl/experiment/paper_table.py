"""`muarl experiment paper-table`: the MUA-RL paper's table in miniature, end to end in one command.
Stages, each writing its result under DIR and skipped when it is already there (so an interrupted
run continues; `reused_stages` in the table lists them; a folder whose task sets this recipe
would not draw is refused, `StaleRunFolder`, before anything in it is written): task sets on disjoint customers
(`DIR/tasks/`), cold-start data played by the teacher and quality-filtered (`DIR/coldstart/`), a
BPE tokenizer and random tiny Qwen3 (`DIR/models/base`), SFT (`DIR/models/cold_start`), both trained
once; then the GRPO runs (rl/experiment/plan.py `grpo_runs`: `mua_rl` for each of `seeds` GRPO
seeds from that one cold start, the ablations `no_cold_start` and `static_query` for
`ablation_seeds`) and the evaluation of every model with every evaluation customer, greedy and
sampled (`DIR/eval/<model>/`, rl/experiment/stages.py; with `workers` > 1 these two kinds of stage
run side by side, rl/experiment/parallel.py), then `DIR/table.json` and `DIR/table.md`
(rl/experiment/table.py), plots and `DIR/failures.{json,md}` (rl/eval/failures.py).

The task sets (`build_task_sets`), each on customers of its own (`customer_bucket`): cold start and
RL (training), `val` (checkpoint selection, on RL-side customers no RL task uses), `dev` (recipe
decisions: `--set eval_set=dev`) and `test` (the table one commits; drawn with `test_task_seed`).
"""


from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import structlog
import torch

from backend.store.tau_data import StoreData
from rl.experiment.environment import ExperimentEnv
from rl.experiment.parallel import run_in_process, run_in_workers, training_and_evaluation_jobs
from rl.experiment.plan import (
    GRPO_RUNS,
    ROWS,
    TASK_SETS,
    Reporter,
    SilentReporter,
    TaskSets,
    customer_folder,
    evaluated_models,
    evaluation_customers,
    grpo_runs,
    result_marker,
    row_result,
    stage_done,
    task_set_names,
)
from rl.experiment.recipe import ExperimentRecipe
from rl.experiment.stages import Stages
from rl.experiment.table import build_table, row_notes, table_markdown
from rl.tasks.schema import Task

log = structlog.get_logger(__name__)
__all__ = ["GRPO_RUNS", "ROWS", "TASK_SETS", "Experiment", "StaleRunFolder", "build_task_sets", "customer_bucket",
           "row_result", "round_robin", "task_set_names", "table_markdown", "write_failures"]
# Which task set a customer's tasks may go to, by tenths of the customers: 20% test, 10% dev,
# 35% cold start, 35% RL (validation takes RL-side customers that no RL task uses).
BUCKETS = (("test", 2), ("dev", 1), ("cold_start", 3.5), ("rl", 3.5))


def customer_bucket(user_id: str, seed: int = 0) -> str:
    """Which task set customer `user_id` belongs to in an experiment of task seed `seed` (`BUCKETS`):
    another task seed shuffles the customers into other buckets."""
    h = int(hashlib.sha256(f"paper-table:{seed}:{user_id}".encode()).hexdigest()[:8], 16) % 20
    edge = 0.0
    for name, tenths in BUCKETS:
        edge += 2 * tenths
        if h < edge:
            return name
    raise AssertionError("BUCKETS must add up to 10 tenths")


def frozen_test_seed(recipe: ExperimentRecipe) -> int:
    """The generator seed of the test set: from `task_seed` and `test_task_seed` together, and never
    one of the `task_seed * 10 + k` seeds of the other sets."""
    h = hashlib.sha256(f"paper-table-test:{recipe.task_seed}:{recipe.test_task_seed}".encode()).hexdigest()
    return 10**9 + int(h[:8], 16)


class StaleRunFolder(ValueError):
    """The output folder holds a stage another recipe made, which this run would otherwise reuse."""


def build_task_sets(recipe: ExperimentRecipe, data: StoreData) -> TaskSets:
    """The experiment's task sets (module docstring): cold start, RL, dev and test on the customers
    of their own bucket (`customer_bucket`), and validation (when the recipe asks for it) on
    customers of the RL bucket that no RL task uses. Dev and test have the evaluation's kinds."""
    wanted = {"cold_start": (recipe.cold_start_mix, recipe.n_cold_start_tasks, recipe.task_seed * 10 + 1),
              "rl": (recipe.rl_mix, recipe.n_rl_tasks, recipe.task_seed * 10 + 2),
              "dev": (recipe.eval_mix, recipe.n_dev_tasks, recipe.task_seed * 10 + 3),
              "test": (recipe.eval_mix, recipe.n_eval_tasks, frozen_test_seed(recipe))}
    out = {name: _bucket_tasks(recipe, data, name, mix, n, seed, stratified=name in ("dev", "test"))
           for name, (mix, n, seed) in wanted.items()}
    if recipe.n_val_tasks:
        out["val"] = _validation_tasks(recipe, data, {t.customer.user_id for t in out["rl"]})
    return out


def _bucket_tasks(recipe: ExperimentRecipe, data: StoreData, bucket: str, mix: list[str], n: int, seed: int,
                  stratified: bool = False) -> list[Task]:
    """`n` distinct tasks of `mix` on customers of `bucket` (`_drawn`; a small bucket needs a large
    pool). `stratified`: the kinds in the mix's proportions (`round_robin`), as the evaluation sets
    have them, else in the generator's order."""
    return _drawn(recipe, data, mix, n, seed, (6, 24, 96),
                  lambda t: customer_bucket(t.customer.user_id, recipe.task_seed) == bucket,
                  what=f"{bucket} tasks", stratified=stratified)


def _drawn(recipe: ExperimentRecipe, data: StoreData, mix: list[str], n: int, seed: int, factors: tuple[int, ...],
           keep: Callable[[Task], bool], *, what: str, stratified: bool = True) -> list[Task]:
    """`n` distinct generated tasks of `mix` that `keep` accepts, from pools of `factors` times `n`
    tasks, each tried only when the one before ran short (the generator is cheap); ValueError
    naming what ran short when even the largest does."""
    from rl.grpo.rollout import task_category
    from rl.tasks.generator import generate_tasks

    error = ""
    for factor in factors:
        pool = generate_tasks(data, max(factor * n, 2 * len(mix)), seed, snapshot=recipe.store, categories=mix)
        mine = _distinct(t for t in pool if keep(t))
        if not stratified:
            if len(mine) >= n:
                return mine[:n]
            error = f"only {len(mine)} {what} could be generated (wanted {n})"
            continue
        by_kind: dict[str, list[Task]] = {}
        for t in mine:
            by_kind.setdefault(task_category(t) or "", []).append(t)
        try:
            return round_robin(by_kind, mix, n, what=what)
        except ValueError as e:
            error = str(e)
    raise ValueError(error)


def _distinct(tasks: Iterable[Task]) -> list[Task]:
    """`tasks` without repeats: the generator can draw the same customer and plan twice."""
    seen: set[str] = set()
    chosen = []
    for t in tasks:
        key = t.customer.user_id + json.dumps([a.model_dump() for a in t.gold_actions], sort_keys=True)
        if key not in seen:
            seen.add(key)
            chosen.append(t)
    return chosen


def _validation_tasks(recipe: ExperimentRecipe, data: StoreData, rl_customers: set[str]) -> list[Task]:
    """`n_val_tasks` tasks of the evaluation's kinds, as evenly as they divide, on RL-bucket
    customers outside `rl_customers`. Few such customers have two pending orders, and the RL set
    takes most of them, so the pools drawn from are large (`_drawn`)."""
    return _drawn(recipe, data, list(dict.fromkeys(recipe.eval_mix)), recipe.n_val_tasks, recipe.task_seed * 10 + 4,
                  (60, 120, 240),
                  lambda t: customer_bucket(t.customer.user_id, recipe.task_seed) == "rl"
                  and t.customer.user_id not in rl_customers,
                  what="validation tasks")


def round_robin(by_kind: dict[str, list[Any]], kinds: list[str], n: int, what: str = "items") -> list[Any]:
    """`n` items taken from `by_kind` one kind after the other in `kinds` order (each kind's items
    in their order; a kind named twice takes two turns a round), so the kinds are as even as `n`
    allows; ValueError when a kind runs out."""
    chosen, taken = [], dict.fromkeys(kinds, 0)
    for i in range(n):
        kind = kinds[i % len(kinds)]
        have = by_kind.get(kind, [])
        if taken[kind] >= len(have):
            raise ValueError(f"only {len(have)} {what} of kind {kind!r} could be generated "
                             f"(wanted {n} over {len(kinds)} kinds)")
        chosen.append(have[taken[kind]])
        taken[kind] += 1
    return chosen


class Experiment:
    def __init__(self, recipe: ExperimentRecipe, out: Path, *, server_url: str | None = None,
                 data_dir: Path | None = None, command: str = "", reporter: Reporter | None = None) -> None:
        self.recipe, self.out, self.command = recipe, Path(out), command
        self.server_url, self.data_dir = server_url, data_dir
        self.report: Reporter = reporter or SilentReporter()
        self.customers = evaluation_customers(recipe)
        self.out.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ driver
    def run(self) -> dict[str, Any]:
        from rl.tasks.stores import resolve_store

        start = time.perf_counter()
        r = self.recipe
        torch.set_num_threads(r.threads)
        data = resolve_store(r.store, self.data_dir)
        reused = ["tasks"] if self._done("tasks") else []
        tasks = self.tasks(data)  # before recipe.json: a folder of another recipe is refused untouched
        (self.out / "recipe.json").write_text(r.model_dump_json(indent=1))
        timings: dict[str, float] = {}
        jobs = training_and_evaluation_jobs(r, len(self.customers))
        with ExperimentEnv(self.server_url, data, r.store, r.pool_size) as env:
            st = Stages(r, self.out, env, self.report, self.customers)
            for name, fn in [("cold_start_data", lambda: st.cold_start_data(tasks["cold_start"])),
                             ("base_model", st.base_model), ("sft", st.sft)]:
                if self._done(name):
                    reused.append(name)
                t0 = time.perf_counter()
                fn()
                timings[name] = time.perf_counter() - t0
            finished = {"base_model", "sft"} | {j.stage for j in jobs if self._done(j.stage)}
            reused += [j.stage for j in jobs if j.stage in finished]
            if r.workers <= 1:
                timings |= run_in_process(st, jobs, finished, tasks)
        if r.workers > 1:
            timings |= run_in_workers(r, self.out, jobs, finished, server_url=self.server_url,
                                      data_dir=self.data_dir, reporter=self.report, customers=self.customers)
        results = {m: json.loads(result_marker(self.out, f"eval_{m}").read_text())["customers"]
                   for m in evaluated_models(r)}
        wall = time.perf_counter() - start
        table = {**build_table(r, results, self.customers, row_notes(self.out, r)),
                 "n_eval_tasks": len(tasks[r.eval_set]), "wall_seconds": round(wall, 1),
                 "command": self.command, "recipe": r.name, "selection": self.selection(),
                 "stage_seconds": {k: round(v, 1) for k, v in timings.items()}, "reused_stages": reused}
        (self.out / "table.json").write_text(json.dumps(table, indent=1))
        (self.out / "table.md").write_text(table_markdown(table))
        from rl.experiment.plots import plot_curves

        plot_curves(self.out)
        write_failures(self.out)
        return table

    def selection(self) -> dict[str, Any]:
        """Per GRPO run, the step its shipped model comes from and the validation scores it was
        chosen by (rl/grpo/selection.py); a run without validation ships its last step."""
        out = {}
        for run in grpo_runs(self.recipe):
            training = json.loads((self.out / "models" / run.name / "manifest.json").read_text())["training"]
            out[run.name] = training.get("selection") or {"step": training.get("steps", self.recipe.grpo.steps)}
        return out

    def _done(self, stage: str) -> bool:
        """Whether `stage`'s result is already in the folder (the stage will be skipped, not rerun)."""
        if stage == "tasks":
            return all((self.out / "tasks" / f"{n}.json").exists() for n in self.task_sets)
        return stage_done(self.out, stage, self.customers)

    @property
    def task_sets(self) -> tuple[str, ...]:
        return task_set_names(self.recipe)

    def tasks(self, data: StoreData) -> TaskSets:
        from rl.tasks.schema import load_tasks, save_tasks

        folder = self.out / "tasks"
        sets = build_task_sets(self.recipe, data)  # cheap: a folder's sets are checked against it
        if self._done("tasks"):
            saved = {n: load_tasks(folder / f"{n}.json") for n in self.task_sets}
            # A folder's later stages were made from its task sets; reusing sets another recipe (an
            # `rl_mix` or `task_seed` given with --set) would ask for would silently run that recipe
            # on this one's tasks.
            differ = [n for n in self.task_sets
                      if [t.model_dump() for t in saved[n]] != [t.model_dump() for t in sets[n]]]
            if differ:
                raise StaleRunFolder(
                    f"{folder} holds task sets this recipe would not draw ({', '.join(differ)}: made by another "
                    f"recipe or version); give a new --out folder, or remove {folder} and the stages made "
                    "from it")
            return saved
        self.report.stage("tasks")
        for n, ts in sets.items():
            save_tasks(folder / f"{n}.json", ts, meta={"recipe": self.recipe.name, "set": n})
        return sets


def failure_table(out: Path) -> dict[str, dict[str, int]]:
    """Per model evaluated under `out/eval/`: how many of its failed greedy episodes with the table's
    customer (the recipe's first) show each cause."""
    from rl.env.episode import Trajectory
    from rl.eval.failures import count_failures
    from rl.tasks.schema import load_tasks

    recipe = ExperimentRecipe.model_validate_json(Path(out, "recipe.json").read_text())
    tasks = load_tasks(Path(out) / "tasks" / f"{recipe.eval_set}.json")
    table = {}
    for model in evaluated_models(recipe):
        path = Path(out) / "eval" / model / customer_folder(recipe.eval_customers[0]) / "greedy" / "episodes.jsonl"
        if path.exists():
            with path.open() as f:
                table[model] = count_failures(tasks, (Trajectory.model_validate_json(ln) for ln in f if ln.strip()))
    return table


def write_failures(out: Path) -> dict[str, dict[str, int]]:
    """`failure_table` as `out/failures.json` and `out/failures.md` (causes down, models across)."""
    table = failure_table(out)
    Path(out, "failures.json").write_text(json.dumps(table, indent=1))
    rows = list(table)
    causes = sorted({c for counts in table.values() for c in counts},
                    key=lambda c: (-sum(t.get(c, 0) for t in table.values()), c))
    lines = ["# Why failed episodes failed", "",
             "Failed greedy episodes with the table's customer, per cause (an episode counts once under each "
             "cause it shows; rl/eval/failures.py).", "",
             "| cause | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    lines += [f"| {c} | " + " | ".join(str(table[r].get(c, 0)) for r in rows) + " |" for c in causes]
    Path(out, "failures.md").write_text("\n".join(lines) + "\n")
    return table
