"""What a paper-table run consists of, shared by its driver (paper_table.py), its stages
(stages.py) and its scheduler (parallel.py): the table's rows, the task sets, the three GRPO runs,
where each stage leaves its result, one row's figures, and how progress is reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import structlog

from rl.experiment.recipe import ExperimentRecipe
from rl.tasks.schema import Task

log = structlog.get_logger(__name__)
ROWS = ["base", "cold_start", "mua_rl", "no_cold_start", "static_query"]
TASK_SETS = ("cold_start", "rl", "eval", "val")
# GRPO row -> (the model it starts from, the customers it trains with: rl/simulator/base.py make_user)
GRPO_RUNS = {"mua_rl": ("cold_start", "scripted"), "no_cold_start": ("base", "scripted"),
             "static_query": ("cold_start", "scripted-static")}
TaskSets = dict[str, list[Task]]


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
    `grpo_<row>`, `eval_<row>`): a stage whose marker exists is skipped, not rerun."""
    fixed = {"cold_start_data": "coldstart/filtered.jsonl",
             "base_model": "models/base/manifest.json", "sft": "models/cold_start/manifest.json"}
    if stage in fixed:
        return out / fixed[stage]
    kind, _, row = stage.partition("_")
    if kind == "grpo":
        return out / "models" / row / "manifest.json"
    if kind == "eval":
        return out / "eval" / row / "summary.json"
    raise ValueError(f"no such stage: {stage!r}")


def row_result(summary: dict[str, Any]) -> dict[str, Any]:
    """The table's row for one evaluation summary (rl.eval.summary): pass^1, TCR, per tag, exclusions."""
    def f(x: Any) -> float:
        return float(x) if x is not None else 0.0

    return {"pass1": f(summary["pass_hat_k"].get("1")), "tcr": f(summary.get("tcr")),
            "by_tag": {tag: {"n": int(v["n"]), "pass1": f(v["pass_hat_k"].get("1"))}
                       for tag, v in summary["by_tag"].items()},
            "excluded": sum(summary.get("excluded", {}).values()),
            "simulator_failures": int(summary.get("simulator_failures", 0))}
