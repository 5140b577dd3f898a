"""Ops HTTP for the training curves (`GET /v1/ops/curves`, Bearer `MUARL_OPS_TOKEN`): what the
console plots, read from what the cycles record. Per GRPO step (from each cycle's
`var/cycles/<id>/train/**/metrics.jsonl`, written by the GRPO trainer): mean reward, the fraction
of groups all correct and all wrong, KL, entropy, turns per rollout. Per cycle: pass^1 on the gate
suite of its candidate and of the champion it was gated against (the registry's gate report)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query

from backend import cycles
from backend.api.deps import EngineDep, RegistryDep, RequireOps, SettingsDep
from backend.api.problems import problem_responses

router = APIRouter(prefix="/v1/ops", tags=["ops: cycles"])

STEP_FIELDS = ("reward_mean", "frac_all_correct", "frac_all_wrong", "kl", "entropy", "turns_mean")


def cycle_folder(var_dir: str, cycle_id: str) -> Path:
    """Where a cycle keeps its work (the same place `rl.pipeline.steps.cycle_folder` names)."""
    return Path(var_dir).resolve() / "cycles" / cycle_id


def read_steps(folder: Path) -> list[dict[str, Any]]:
    """Every GRPO step the cycle recorded; a torn last line (a step being written) is skipped."""
    steps = []
    for path in sorted(folder.glob("train/**/metrics.jsonl")):
        for line in path.read_text().splitlines():
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if isinstance(m, dict):
                steps.append({"step": m.get("step"), **{k: m.get(k) for k in STEP_FIELDS}})
    return steps


def _pass1(report: dict[str, Any], model: str) -> float | None:
    value = ((report.get("pass_hat_k") or {}).get(model) or {}).get("1") or {}
    return value.get("value") if isinstance(value, dict) else None


@router.get("/curves", responses=problem_responses(401, 403, 422, 500, 503))
async def training_curves(_: RequireOps, engine: EngineDep, registry: RegistryDep, settings: SettingsDep,
                          limit: int = Query(default=50, ge=1, le=500)) -> dict[str, Any]:
    """Training curves of the last `limit` cycles, oldest first: `steps` (every GRPO step, with its
    cycle) and `cycles` (gate pass^1 of the candidate and of the champion then)."""
    out_cycles, out_steps = [], []
    for c in reversed(await cycles.list_cycles(engine, limit)):
        steps = read_steps(cycle_folder(settings.var_dir, c.id))
        out_steps += [{"cycle_id": c.id, **s} for s in steps]
        cand = champ = None
        if c.candidate:
            reports = await registry.gate_reports(c.candidate)
            if reports:
                cand, champ = _pass1(reports[0].report, "candidate"), _pass1(reports[0].report, "champion")
        out_cycles.append({"cycle_id": c.id, "status": c.status, "candidate": c.candidate, "steps": len(steps),
                           "gate_pass1": cand, "champion_pass1": champ,
                           "created_at": c.created_at.isoformat() if c.created_at else None})
    return {"cycles": out_cycles, "steps": out_steps}
