"""The five steps of an online cycle as plain functions (the Celery tasks are thin calls into
`rl.pipeline.runner.run_step`, which calls these; tests call them directly too).

Every step works in the cycle's folder (`<var>/cycles/<cycle id>`) and returns a small JSON
result that the runner stores in the cycle's row; a step rerun after a crash finds what it
already finished in that folder and reuses it:
1. `snapshot`: the live store, read in one read-only repeatable-read transaction, becomes the
   frozen template database `muarl_cycle_<id>` (the store's records are also kept as
   `snapshot.json`, so a restarted worker rebuilds the `Snapshot` without reading the live
   store again). Nothing in the cycle ever writes to the live store.
2. `tasks`: from that snapshot, the recipe's generated task sets (cold start, RL, evaluation),
   the fixed gate suite, and tasks mined from production (`hooks.mined_tasks`), as task files.
3. `train`: cold-start SFT when there is no champion, else GRPO from the champion (its reference
   model is the champion itself; with the recipe's `grpo.anchor_coef`, anchored to the teacher's
   conversations on this cycle's cold-start tasks, as in the experiment), with rl/experiment's
   stages; GRPO resumes from its last checkpoint after a crash. The model is then copied to
   `<var>/models/<cycle id>`.
4. `gate`: register the candidate (once) and play it against the champion on the gate suite;
   the report is recorded in the registry.
5. `promote`: make the candidate champion if its gates passed and auto-promotion is on; otherwise
   it stays the registry's `candidate` for ops.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from backend.config import Settings
from rl.pipeline.progress import CycleReporter
from rl.pipeline.state import CycleDB

log = structlog.get_logger(__name__)


@dataclass
class StepContext:
    cycle: dict[str, Any]  # the cycle's row as the step began
    db: CycleDB
    settings: Settings
    store_url: str  # the live store (read only)
    reporter: CycleReporter

    @property
    def cycle_id(self) -> str:
        return self.cycle["id"]

    @property
    def folder(self) -> Path:
        path = cycle_folder(self.settings, self.cycle_id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def outputs(self) -> dict[str, Any]:
        return self.cycle.get("outputs") or {}

    @property
    def recipe(self) -> Any:
        from rl.experiment.recipe import get_recipe, with_overrides

        return with_overrides(get_recipe(self.cycle["recipe"]), list(self.cycle.get("overrides") or []))

    @property
    def server_url(self) -> str:
        return self.store_url


def cycle_folder(settings: Settings, cycle_id: str) -> Path:
    return Path(settings.var_dir).resolve() / "cycles" / cycle_id


def snapshot_name(cycle_id: str) -> str:
    return f"muarl_cycle_{cycle_id}"


def run_async(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)


# ---------------------------------------------------------------------------- 1 snapshot
def snapshot(ctx: StepContext) -> dict[str, Any]:
    import time

    from backend.db.engine import database_exists
    from rl.env.snapshot import _drop, create_snapshot, snapshot_from_database
    from rl.pipeline import hooks

    name = snapshot_name(ctx.cycle_id)
    data_path = ctx.folder / "snapshot.json"
    ctx.reporter.stage("copying the live store into a frozen template", None)
    t0 = time.perf_counter()
    if data_path.exists() and run_async(database_exists(ctx.server_url, name)):
        data = json.loads(data_path.read_text())
        reused = True
    else:  # a half-made template of an interrupted run is dropped and made again
        run_async(_drop(ctx.server_url, name))
        # customers about to be mined start as they were when their conversation was transferred:
        # then the snapshot is made from those records, else it is a straight copy of the live store
        restored = run_async(hooks.restored_store(ctx.store_url, ctx.cycle_id))
        if restored is None:
            snap = run_async(snapshot_from_database(ctx.server_url, ctx.store_url, name=name))
        else:
            snap = run_async(create_snapshot(ctx.server_url, restored, name))
        data = snap.initial
        tmp = data_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(data_path)
        reused = False
    ctx.db.update(ctx.cycle_id, snapshot=name)
    return {"name": name, "users": len(data["users"]), "orders": len(data["orders"]),
            "products": len(data["products"]), "seconds": round(time.perf_counter() - t0, 3), "reused": reused}


def load_snapshot(ctx: StepContext) -> Any:
    """The cycle's `Snapshot` (its template database and its records), rebuilt from the folder."""
    from rl.env.snapshot import Snapshot

    data = json.loads((ctx.folder / "snapshot.json").read_text())
    return Snapshot(name=snapshot_name(ctx.cycle_id), server_url=ctx.server_url, initial=data)


# ---------------------------------------------------------------------------- 2 tasks
def tasks(ctx: StepContext) -> dict[str, Any]:
    from rl.experiment.paper_table import build_task_sets
    from rl.pipeline import hooks
    from rl.tasks.schema import save_tasks

    folder = ctx.folder / "tasks"
    done = folder / "manifest.json"
    if done.exists():
        return json.loads(done.read_text())
    recipe = ctx.recipe
    data = load_snapshot(ctx).initial
    ctx.reporter.stage("building the task sets", 3)
    sets = build_task_sets(recipe, data)
    ctx.reporter.advance(1)
    sets["gate"] = hooks.gate_suite(recipe, data, sets)
    ctx.reporter.advance(1)
    sets["mined"] = hooks.mined_tasks(ctx.store_url, data, recipe.store, ctx.cycle_id)
    ctx.reporter.advance(1)
    for name, items in sets.items():
        save_tasks(folder / f"{name}.json", items, {"cycle": ctx.cycle_id, "set": name, "snapshot": recipe.store})
    result = {"sets": {name: len(items) for name, items in sets.items()}, "folder": str(folder)}
    done.write_text(json.dumps(result))
    return result


def load_task_set(ctx: StepContext, name: str) -> list[Any]:
    from rl.tasks.schema import load_tasks

    path = ctx.folder / "tasks" / f"{name}.json"
    return load_tasks(path) if path.exists() else []


# ---------------------------------------------------------------------------- 3 train
def train(ctx: StepContext) -> dict[str, Any]:
    import torch

    from rl.experiment.environment import ExperimentEnv
    from rl.experiment.stages import Stages
    from rl.pipeline import models

    recipe = ctx.recipe
    torch.set_num_threads(recipe.threads)
    champion = run_async(models.champion(ctx.store_url))
    ctx.db.update(ctx.cycle_id, champion=champion.id if champion else None)
    snap = load_snapshot(ctx)
    out = ctx.folder / "train"
    out.mkdir(exist_ok=True)
    (out / "recipe.json").write_text(recipe.model_dump_json(indent=1))
    with ExperimentEnv(ctx.server_url, snap.initial, recipe.store, recipe.pool_size, snapshot=snap) as env:
        st = Stages(recipe, out, env, ctx.reporter)
        if champion is None:
            ctx.reporter.stages = 3
            st.cold_start_data(load_task_set(ctx, "cold_start"))
            st.base_model()
            model_dir = st.sft()
            method = "sft"
        else:
            method = "grpo"
            model_dir = _grpo_from_champion(ctx, st, champion, out)
    final = Path(ctx.settings.var_dir).resolve() / "models" / ctx.cycle_id
    # the recipe as the registry reads it: `muarl gate run --candidate ID` finds the suite and floor
    gate = {"suite": str(ctx.folder / "tasks" / "gate.json"), "floor": recipe.gate_floor}
    _publish(model_dir, final, {"recipe": {"name": recipe.name, "overrides": list(ctx.cycle.get("overrides") or []),
                                           "gate": gate},
                                "training_run": f"cycle:{ctx.cycle_id}",
                                "store_snapshot": snap.name, "parent_version": champion.id if champion else None,
                                "cycle": ctx.cycle_id})
    return {"method": method, "model_dir": str(final), "from": champion.id if champion else None}


def _grpo_from_champion(ctx: StepContext, st: Any, champion: Any, out: Path) -> Path:
    from rl.chat.views import ChatView

    start = st.model_dir("champion")
    if not (start / "manifest.json").exists():
        source = Path(champion.artifact_uri)
        if champion.engine != "local" or not source.is_dir():
            raise RuntimeError(f"the champion {champion.id} is served by {champion.engine!r} from "
                               f"{champion.artifact_uri}; the cycle trains only local model folders")
        tmp = start.with_name("champion.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp)
        tmp.replace(start)
    manifest = json.loads((start / "manifest.json").read_text())
    st._view = ChatView.from_manifest(manifest.get("view"))  # the layout the champion was trained with
    latest = out / "grpo" / "candidate" / "checkpoints" / "latest"
    if latest.exists():
        ctx.db.event(ctx.cycle_id, "train.resumed", checkpoint=latest.read_text().strip())
    rl_tasks = load_task_set(ctx, "rl") + load_task_set(ctx, "mined")
    if st.recipe.grpo.anchor_coef:  # the anchor is the teacher's conversations on this snapshot
        st.cold_start_data(load_task_set(ctx, "cold_start"))
    return st.grpo("candidate", "champion", st.recipe.train_customer, rl_tasks)


def _publish(model_dir: Path, final: Path, extra: dict[str, Any]) -> None:
    """Copy the trained model to its permanent folder (what the registry records), with the
    cycle's lineage added to its manifest."""
    if (final / "manifest.json").exists():
        return
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(model_dir, tmp)
    manifest = json.loads((tmp / "manifest.json").read_text())
    (tmp / "manifest.json").write_text(json.dumps({**manifest, **extra}, indent=2, default=str))
    tmp.replace(final)


# ---------------------------------------------------------------------------- 4 gate
def gate(ctx: StepContext) -> dict[str, Any]:
    from rl.pipeline import models

    model_dir = Path(ctx.outputs["train"]["model_dir"])
    champion_id = ctx.outputs["train"]["from"]
    candidate = ctx.cycle.get("candidate")
    if candidate is None:  # registered once: a rerun finds the id in the row
        candidate = run_async(models.register(ctx.store_url, model_dir, cycle_id=ctx.cycle_id,
                                              recipe=ctx.cycle["recipe"], parent=champion_id))
        ctx.db.update(ctx.cycle_id, candidate=candidate)
        ctx.db.event(ctx.cycle_id, "registered", version=candidate)
    report = models.run_gate(ctx, candidate, champion_id)
    ctx.db.update(ctx.cycle_id, gate_passed=bool(report["passed"]), gate_report=report)
    return {"candidate": candidate, "baseline": champion_id, "passed": bool(report["passed"])}


# ---------------------------------------------------------------------------- 5 promote
def promote(ctx: StepContext) -> dict[str, Any]:
    from rl.pipeline import models

    candidate = ctx.outputs["gate"]["candidate"]
    passed = ctx.outputs["gate"]["passed"]
    if passed and ctx.settings.cycle_auto_promote:
        run_async(models.promote(ctx.store_url, candidate, f"cycle {ctx.cycle_id}: gates passed", ctx.settings))
        ctx.db.update(ctx.cycle_id, promoted=True)
        return {"promoted": True, "candidate": candidate}
    why = "auto-promotion is off" if passed else "its gates failed"
    run_async(models.leave_as_candidate(ctx.store_url, candidate, f"cycle {ctx.cycle_id}: {why}"))
    return {"promoted": False, "candidate": candidate, "why": why}


STEP_FUNCTIONS = {"snapshot": snapshot, "tasks": tasks, "train": train, "gate": gate, "promote": promote}
