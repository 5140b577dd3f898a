"""What a paper-table run consists of, shared by its driver (paper_table.py), its stages
(stages.py) and its scheduler (parallel.py): the table's rows, the task sets, the GRPO runs (one
per row and seed), the models evaluated and the customers they are evaluated with, where each stage
leaves its result, one evaluation's figures, and how progress is reported."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from rl.experiment.recipe import ExperimentRecipe
from rl.tasks.schema import Task

log = structlog.get_logger(__name__)
ROWS = ["base", "cold_start", "mua_rl", "no_cold_start", "static_query"]
# The paper's names for the rows: "w/o RL" is the cold start, "w/o cold start" GRPO from the base.
ROW_LABELS = {"base": "base (random init)", "cold_start": "cold start (w/o RL)", "mua_rl": "MUA-RL",
              "no_cold_start": "w/o cold start", "static_query": "static query"}
# dev and test are the evaluation sets (recipe `eval_set` says which one a run evaluates on)
TASK_SETS = ("cold_start", "rl", "dev", "test", "val")
# GRPO row -> (the model it starts from, the customers it trains with: rl/simulator/base.py make_user;
# "train" is the recipe's `train_customer`, the customer of its cold-start data)
GRPO_RUNS = {"mua_rl": ("cold_start", "train"), "no_cold_start": ("base", "train"),
             "static_query": ("cold_start", "scripted-static")}
TaskSets = dict[str, list[Task]]


@dataclass(frozen=True)
class GrpoRun:
    """One GRPO run: `row` (a key of `GRPO_RUNS`) with GRPO seed `seed`; its model is `models/<name>`."""

    row: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.row}_s{self.seed}"


def grpo_runs(recipe: ExperimentRecipe) -> list[GrpoRun]:
    """`mua_rl` for `recipe.seeds` GRPO seeds (grpo.seed, grpo.seed + 1, ...), each ablation for the
    first `ablation_seeds` of them; all from the one base model and the one cold start."""
    seeds = [recipe.grpo.seed + i for i in range(recipe.seeds)]
    return [GrpoRun(row, s) for row in GRPO_RUNS
            for s in (seeds if row == "mua_rl" else seeds[:recipe.ablation_seeds])]


def grpo_customer(recipe: ExperimentRecipe, row: str) -> str:
    """The customer GRPO row `row` trains with (a `make_user` spec)."""
    spec = GRPO_RUNS[row][1]
    return recipe.train_customer if spec == "train" else spec


def run_named(recipe: ExperimentRecipe, name: str) -> GrpoRun:
    for run in grpo_runs(recipe):
        if run.name == name:
            return run
    raise ValueError(f"recipe {recipe.name!r} has no GRPO run {name!r}")


def row_models(recipe: ExperimentRecipe) -> dict[str, list[str]]:
    """Per row of the table, the models evaluated for it (one per seed for the GRPO rows); an
    ablation the recipe does not run (`ablation_seeds` 0) has no row."""
    runs = grpo_runs(recipe)
    rows = {row: [r.name for r in runs if r.row == row] if row in GRPO_RUNS else [row] for row in ROWS}
    return {row: models for row, models in rows.items() if models}


def evaluated_models(recipe: ExperimentRecipe) -> list[str]:
    return [m for models in row_models(recipe).values() for m in models]


def evaluation_customers(recipe: ExperimentRecipe, settings: Any = None) -> list[str]:
    """The customers every model is evaluated with: the recipe's, then `llm:MODEL` when the recipe
    allows it and an LLM endpoint is configured (`MUARL_LLM_BASE_URL` and `MUARL_LLM_MODEL`, as
    rl/simulator/llm.py finds it). The first one gives the table's `rows`."""
    customers = list(dict.fromkeys(recipe.eval_customers))
    if recipe.llm_customer:
        if settings is None:
            from backend.config import get_settings

            settings = get_settings()
        if settings.llm_base_url and settings.llm_model and f"llm:{settings.llm_model}" not in customers:
            customers.append(f"llm:{settings.llm_model}")
    return customers


def customer_folder(spec: str) -> str:
    """A folder name for customer `spec` (`llm:org/model` -> `llm_org_model`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", spec)


class Reporter(Protocol):
    def stage(self, name: str, total: int | None = None) -> None: ...
    def advance(self, n: int = 1, **info: Any) -> None: ...
    def lane(self) -> Reporter:
        """A reporter for stages that run at the same time as this one's (another progress bar)."""
        ...


class SilentReporter:
    """A reporter that only logs each stage's start."""

    def stage(self, name: str, total: int | None = None) -> None:
        log.info("experiment.stage", stage=name, total=total)

    def advance(self, n: int = 1, **info: Any) -> None:
        pass

    def lane(self) -> SilentReporter:
        return self


def task_set_names(recipe: ExperimentRecipe) -> tuple[str, ...]:
    """The task sets a run of `recipe` has: `TASK_SETS`, less validation when the recipe has none."""
    return TASK_SETS if recipe.n_val_tasks else tuple(n for n in TASK_SETS if n != "val")


def result_marker(out: Path, stage: str) -> Path:
    """The file whose presence means `stage` is done (`cold_start_data`, `base_model`, `sft`,
    `grpo_<run>`, `eval_<model>`): a stage whose marker exists is skipped, not rerun (an evaluation's
    marker must also hold every customer asked for: `stage_done`)."""
    fixed = {"cold_start_data": "coldstart/filtered.jsonl",
             "base_model": "models/base/manifest.json", "sft": "models/cold_start/manifest.json"}
    if stage in fixed:
        return out / fixed[stage]
    kind, _, row = stage.partition("_")
    if kind == "grpo":
        return out / "models" / row / "manifest.json"
    if kind == "eval":
        return out / "eval" / row / "result.json"
    raise ValueError(f"no such stage: {stage!r}")


def stage_done(out: Path, stage: str, customers: list[str]) -> bool:
    """Whether `stage`'s result is in `out`: its marker exists and, for an evaluation, holds every
    one of `customers` (a customer added later, such as an LLM one, is evaluated on a rerun)."""
    import json

    marker = result_marker(out, stage)
    if not marker.exists():
        return False
    if stage.startswith("eval_"):
        return set(customers) <= set(json.loads(marker.read_text())["customers"])
    return True


def row_result(summary: dict[str, Any]) -> dict[str, Any]:
    """One evaluation summary's figures (rl.eval.summary): pass^1, TCR, per tag, exclusions."""
    def f(x: Any) -> float:
        return float(x) if x is not None else 0.0

    return {"pass1": f(summary["pass_hat_k"].get("1")), "tcr": f(summary.get("tcr")),
            "by_tag": {tag: {"n": int(v["n"]), "pass1": f(v["pass_hat_k"].get("1"))}
                       for tag, v in summary["by_tag"].items()},
            "excluded": sum(summary.get("excluded", {}).values()),
            "simulator_failures": int(summary.get("simulator_failures", 0))}
