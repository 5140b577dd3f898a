"""`muarl verl prepare`: the files a verl GRPO run needs, from one of our task files.

Writes into OUT: `train.parquet` / `val.parquet` (verl's RLHF dataset schema: `data_source`,
`agent_name` = our loop, `prompt` (the store policy as system message; the loop plays the real
conversation), `ability`, `reward_model`, `extra_info` with `task_id`, `snapshot`, `index`, `split`),
`tasks.json` (the tasks the loop plays), `agent_loops.yaml` (for
`actor_rollout_ref.rollout.agent.agent_loop_config_path`), `run_grpo.sh` (the whole
`python -m verl.trainer.main_ppo` command line), and `run_sft.sh` (cold-start SFT with verl's SFT
trainer; with `--coldstart FILE` the records are written as `sft.parquet` in its multi-turn
`messages` + `tools` format). Parquet needs pyarrow: run it in the verl environment (.venv-verl).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

from rl.tasks.schema import Task, load_tasks, save_tasks
from rl.verl.agent_loop_name import AGENT_NAME, LOOP_TARGET
from rl.verl.recipes import Recipe, get_recipe, grpo_overrides, sft_overrides

DATA_SOURCE = "muarl/retail"


def split_of(task_id: str, val_fraction: float) -> str:
    """A task's split, stable across runs (a hash of its id)."""
    h = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "val" if h < val_fraction else "train"


def rows(tasks: list[Task], split: str) -> list[dict[str, Any]]:
    from backend.agent.policy import system_prompt

    system = system_prompt()
    return [{
        "data_source": DATA_SOURCE,
        "agent_name": AGENT_NAME,
        "prompt": [{"role": "system", "content": system}],
        "ability": "customer_service",
        "reward_model": {"style": "rule", "ground_truth": t.id},
        "extra_info": {"task_id": t.id, "snapshot": t.snapshot, "index": i, "split": split},
    } for i, t in enumerate(tasks)]


def _write_parquet(records: list[dict[str, Any]], path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        raise RuntimeError("writing parquet needs pyarrow: run this in the verl environment "
                           "(make verl-venv; .venv-verl/bin/muarl verl prepare ...)") from None
    pq.write_table(pa.Table.from_pylist(records), path)


def agent_loops_yaml(tasks_path: Path, *, user: str, pool_size: int, max_turns: int) -> str:
    env = {"name": "muarl", "tasks": str(tasks_path), "user": user, "pool_size": pool_size, "max_turns": max_turns}
    # JSON is YAML: every value quoted exactly
    return (f"- name: {AGENT_NAME}\n  _target_: {LOOP_TARGET}\n"
            f"  env: {json.dumps(env)}\n")


def _script(head: str, overrides: list[str]) -> str:
    lines = " \\\n  ".join(shlex.quote(o) for o in overrides)
    return ("#!/usr/bin/env bash\n# written by `muarl verl prepare`; extra Hydra overrides may follow as arguments\n"
            f"set -euo pipefail\n{head} \\\n  {lines} \\\n  \"$@\"\n")


def prepare(tasks_file: str | Path, recipe_name: str, out: str | Path, *, val_fraction: float = 0.1,
            user: str = "scripted", pool_size: int = 8, max_turns: int = 30, model_path: str | None = None,
            coldstart: str | Path | None = None) -> dict[str, Any]:
    recipe: Recipe = get_recipe(recipe_name)
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError("--val-fraction must be in [0, 1)")
    tasks = load_tasks(tasks_file)
    if not tasks:
        raise ValueError(f"{tasks_file}: no tasks")
    train = [t for t in tasks if split_of(t.id, val_fraction) == "train"]
    val = [t for t in tasks if split_of(t.id, val_fraction) == "val"] or tasks[:1]
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    tasks_path = out / "tasks.json"
    save_tasks(tasks_path, tasks, meta={"source": str(tasks_file)})
    _write_parquet(rows(train, "train"), out / "train.parquet")
    _write_parquet(rows(val, "val"), out / "val.parquet")
    (out / "agent_loops.yaml").write_text(agent_loops_yaml(tasks_path, user=user, pool_size=pool_size,
                                                           max_turns=max_turns))
    grpo = out / "run_grpo.sh"
    grpo.write_text(_script("python -m verl.trainer.main_ppo", grpo_overrides(recipe, out, model_path=model_path)))
    sft = out / "run_sft.sh"
    nproc = recipe.gpus // recipe.nnodes
    sft.write_text(_script(f"torchrun --standalone --nnodes=1 --nproc_per_node=${{NPROC:-{nproc}}} "
                           "-m verl.trainer.sft_trainer", sft_overrides(recipe, out, model_path=model_path)))
    for p in (grpo, sft):
        p.chmod(0o755)
    n_sft = 0
    if coldstart is not None:
        records = [json.loads(line) for line in Path(coldstart).read_text().splitlines() if line.strip()]
        _write_parquet([{"messages": r["messages"], "tools": json.dumps(r.get("tools") or [])} for r in records],
                       out / "sft.parquet")
        n_sft = len(records)
    return {"out": str(out), "recipe": recipe.name, "train": len(train), "val": len(val), "sft": n_sft}
