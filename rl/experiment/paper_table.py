"""`muarl experiment paper-table`: the MUA-RL paper's table in miniature, end to end in one command.
Stages, each writing its result under DIR and skipped when it is already there (so an interrupted
run continues; `reused_stages` in the table lists them): task sets on disjoint customers
(`DIR/tasks/`), cold-start data played by the teacher and quality-filtered (`DIR/coldstart/`), a
BPE tokenizer and random tiny Qwen3 (`DIR/models/base`), SFT (`DIR/models/cold_start`), three GRPO
runs (`mua_rl`, `no_cold_start`, `static_query`: rl/experiment/plan.py `GRPO_RUNS`), evaluation of
the five rows on the held-out tasks (`DIR/eval/<row>/`; with `workers` > 1 these two kinds of stage
run side by side, rl/experiment/parallel.py), then `DIR/table.json`, `DIR/table.md`, plots and
`DIR/failures.{json,md}` (rl/eval/failures.py)."""


from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
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
    result_marker,
    row_result,
    task_set_names,
)
from rl.experiment.recipe import ExperimentRecipe
from rl.experiment.stages import Stages
from rl.tasks.schema import Task

log = structlog.get_logger(__name__)
__all__ = ["GRPO_RUNS", "ROWS", "TASK_SETS", "Experiment", "build_task_sets", "customer_bucket",
           "row_result", "round_robin", "task_set_names", "write_failures"]


def customer_bucket(user_id: str) -> str:
    """Which task set a customer belongs to: 20% evaluation, 40% cold start, 40% RL."""
    h = int(hashlib.sha256(f"paper-table:{user_id}".encode()).hexdigest()[:8], 16) % 10
    return "eval" if h < 2 else "cold_start" if h < 6 else "rl"


def build_task_sets(recipe: ExperimentRecipe, data: StoreData) -> TaskSets:
    """The experiment's task sets: cold start, RL and evaluation on the customers of their own
    bucket (`customer_bucket`), and validation (when the recipe asks for it) on customers of the RL
    bucket that no RL task uses."""
    from rl.tasks.generator import generate_tasks

    wanted = {"cold_start": (recipe.cold_start_mix, recipe.n_cold_start_tasks, 1),
              "rl": (recipe.rl_mix, recipe.n_rl_tasks, 2), "eval": (recipe.eval_mix, recipe.n_eval_tasks, 3)}
    out = {}
    for name, (mix, n, salt) in wanted.items():
        pool = generate_tasks(data, max(6 * n, 2 * len(mix)), recipe.task_seed * 10 + salt, snapshot=recipe.store,
                              categories=mix)
        chosen = _distinct(t for t in pool if customer_bucket(t.customer.user_id) == name)[:n]
        if len(chosen) < n:
            raise ValueError(f"only {len(chosen)} {name} tasks could be generated (wanted {n})")
        out[name] = chosen
    if recipe.n_val_tasks:
        out["val"] = _validation_tasks(recipe, data, {t.customer.user_id for t in out["rl"]})
    return out


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
    customers outside `rl_customers`. Few such customers have two pending orders, so the pool drawn
    from is large (the generator is cheap: a few seconds)."""
    from rl.grpo.rollout import task_category
    from rl.tasks.generator import generate_tasks

    n, mix = recipe.n_val_tasks, list(dict.fromkeys(recipe.eval_mix))
    pool = generate_tasks(data, max(60 * n, 2 * len(mix)), recipe.task_seed * 10 + 4, snapshot=recipe.store,
                          categories=mix)
    by_kind: dict[str, list[Task]] = {k: [] for k in mix}
    for t in _distinct(t for t in pool if customer_bucket(t.customer.user_id) == "rl"
                       and t.customer.user_id not in rl_customers):
        by_kind.setdefault(task_category(t) or "", []).append(t)
    return round_robin(by_kind, mix, n, what="validation tasks")


def round_robin(by_kind: dict[str, list[Any]], kinds: list[str], n: int, what: str = "items") -> list[Any]:
    """`n` items taken from `by_kind` one kind after the other in `kinds` order (each kind's items
    in their order), so the kinds are as even as `n` allows; ValueError when a kind runs out."""
    chosen = []
    for i in range(n):
        kind, rank = kinds[i % len(kinds)], i // len(kinds)
        have = by_kind.get(kind, [])
        if rank >= len(have):
            raise ValueError(f"only {len(have)} {what} of kind {kind!r} could be generated "
                             f"(wanted {n} over {len(kinds)} kinds)")
        chosen.append(have[rank])
    return chosen


class Experiment:
    def __init__(self, recipe: ExperimentRecipe, out: Path, *, server_url: str | None = None,
                 data_dir: Path | None = None, command: str = "", reporter: Reporter | None = None) -> None:
        self.recipe, self.out, self.command = recipe, Path(out), command
        self.server_url, self.data_dir = server_url, data_dir
        self.report: Reporter = reporter or SilentReporter()
        self.out.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ driver
    def run(self) -> dict[str, Any]:
        from rl.tasks.stores import resolve_store

        start = time.perf_counter()
        torch.set_num_threads(self.recipe.threads)
        (self.out / "recipe.json").write_text(self.recipe.model_dump_json(indent=1))
        data = resolve_store(self.recipe.store, self.data_dir)
        reused = ["tasks"] if self._done("tasks") else []
        tasks = self.tasks(data)
        timings: dict[str, float] = {}
        jobs = training_and_evaluation_jobs()
        with ExperimentEnv(self.server_url, data, self.recipe.store, self.recipe.pool_size) as env:
            st = Stages(self.recipe, self.out, env, self.report)
            for name, fn in [("cold_start_data", lambda: st.cold_start_data(tasks["cold_start"])),
                             ("base_model", st.base_model), ("sft", st.sft)]:
                if self._done(name):
                    reused.append(name)
                t0 = time.perf_counter()
                fn()
                timings[name] = time.perf_counter() - t0
            finished = {"base_model", "sft"} | {j.stage for j in jobs if self._done(j.stage)}
            reused += [j.stage for j in jobs if j.stage in finished]
            if self.recipe.workers <= 1:
                timings |= run_in_process(st, jobs, finished, tasks)
        if self.recipe.workers > 1:
            timings |= run_in_workers(self.recipe, self.out, jobs, finished, server_url=self.server_url,
                                      data_dir=self.data_dir, reporter=self.report)
        rows = {row: row_result(json.loads((self.out / "eval" / row / "summary.json").read_text())) for row in ROWS}
        wall = time.perf_counter() - start
        table = {"rows": rows, "n_eval_tasks": len(tasks["eval"]), "wall_seconds": round(wall, 1),
                 "command": self.command, "recipe": self.recipe.name, "selection": self.selection(),
                 "stage_seconds": {k: round(v, 1) for k, v in timings.items()}, "reused_stages": reused}
        (self.out / "table.json").write_text(json.dumps(table, indent=1))
        (self.out / "table.md").write_text(table_markdown(table))
        from rl.experiment.plots import plot_curves

        plot_curves(self.out)
        write_failures(self.out)
        return table

    def selection(self) -> dict[str, Any]:
        """Per GRPO row, the step its shipped model comes from and the validation scores it was
        chosen by (rl/grpo/selection.py); a run without validation ships its last step."""
        out = {}
        for row in GRPO_RUNS:
            training = json.loads((self.out / "models" / row / "manifest.json").read_text())["training"]
            out[row] = training.get("selection") or {"step": training.get("steps", self.recipe.grpo.steps)}
        return out

    def _done(self, stage: str) -> bool:
        """Whether `stage`'s result is already in the folder (the stage will be skipped, not rerun)."""
        if stage == "tasks":
            return all((self.out / "tasks" / f"{n}.json").exists() for n in self.task_sets)
        return result_marker(self.out, stage).exists()

    @property
    def task_sets(self) -> tuple[str, ...]:
        return task_set_names(self.recipe)

    def tasks(self, data: StoreData) -> TaskSets:
        from rl.tasks.schema import load_tasks, save_tasks

        folder = self.out / "tasks"
        if self._done("tasks"):
            return {n: load_tasks(folder / f"{n}.json") for n in self.task_sets}
        self.report.stage("tasks")
        sets = build_task_sets(self.recipe, data)
        for n, ts in sets.items():
            save_tasks(folder / f"{n}.json", ts, meta={"recipe": self.recipe.name, "set": n})
        return sets


def failure_table(out: Path) -> dict[str, dict[str, int]]:
    """Per row with an evaluation under `out/eval/`: how many failed episodes show each cause."""
    from rl.env.episode import Trajectory
    from rl.eval.failures import count_failures
    from rl.tasks.schema import load_tasks

    tasks = load_tasks(Path(out) / "tasks" / "eval.json")
    table = {}
    for row in ROWS:
        path = Path(out) / "eval" / row / "episodes.jsonl"
        if path.exists():
            with path.open() as f:
                table[row] = count_failures(tasks, (Trajectory.model_validate_json(ln) for ln in f if ln.strip()))
    return table


def write_failures(out: Path) -> dict[str, dict[str, int]]:
    """`failure_table` as `out/failures.json` and `out/failures.md` (causes down, rows across)."""
    table = failure_table(out)
    Path(out, "failures.json").write_text(json.dumps(table, indent=1))
    rows = list(table)
    causes = sorted({c for counts in table.values() for c in counts},
                    key=lambda c: (-sum(t.get(c, 0) for t in table.values()), c))
    lines = ["# Why failed episodes failed", "",
             "Failed held-out episodes per cause (an episode counts once under each cause it shows; "
             "rl/eval/failures.py).", "",
             "| cause | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    lines += [f"| {c} | " + " | ".join(str(table[r].get(c, 0)) for r in rows) + " |" for c in causes]
    Path(out, "failures.md").write_text("\n".join(lines) + "\n")
    return table


def table_markdown(table: dict[str, Any]) -> str:
    rows = table["rows"]
    tags = sorted({t for r in rows.values() for t in r["by_tag"] if not t.startswith("category:")})
    lines = [f"# Paper table (recipe {table.get('recipe', '?')})", "",
             f"{table['n_eval_tasks']} held-out tasks, scripted customers, greedy, one trial each; "
             f"pass^1 and TCR in %. Wall time {table['wall_seconds'] / 60:.1f} min.", ""]
    if table.get("reused_stages"):
        lines += [f"Resumed: {', '.join(table['reused_stages'])} were already in the folder and were not rerun; "
                  "the wall time counts only the stages run here.", ""]
    lines += ["| model | pass^1 | TCR | " + " | ".join(tags) + " |", "|---|---|---|" + "---|" * len(tags)]
    for name, r in rows.items():
        cells = [f"{100 * r['by_tag'][t]['pass1']:.1f} (n={r['by_tag'][t]['n']})" if t in r["by_tag"] else "-"
                 for t in tags]
        lines.append(f"| {name} | {100 * r['pass1']:.1f} | {100 * r['tcr']:.1f} | " + " | ".join(cells) + " |")
    if table.get("selection"):
        lines += ["", "Which GRPO step each run ships (rl/grpo/selection.py):", ""]
        lines += _selection_lines(table["selection"])
    lines += ["", f"Command: `{table['command']}`", ""]
    return "\n".join(lines)


def _selection_lines(selection: dict[str, Any]) -> list[str]:
    lines = []
    for row, sel in selection.items():
        if not sel.get("scores"):
            lines.append(f"- {row} ships step {sel['step']}, its last.")
            continue
        scores = ", ".join(f"step {k}: {100 * float(v):.1f}" for k, v in sel["scores"].items())
        lines.append(f"- {row} ships step {sel['step']}, the best on {sel['validation_tasks']} validation tasks "
                     f"(reward in % by step: {scores}).")
    return lines
