"""What chat's 503 says while no model can answer: the training cycle's progress, read from the
cycle state table (`backend/cycles.py`), so a customer (or a newcomer after `make run`) sees the
first model coming: the step, how far the cycle is, and about how long is left. Installed on the
serving side's no-model answer (`backend.serving.champion.add_no_model_detail`) while the app runs."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from backend.cycles import active_cycle, cycle_json, list_cycles


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "time left not known yet"
    minutes = max(1, round(seconds / 60))
    return f"about {minutes} min left in this step"


def progress_fields(c: dict[str, Any]) -> dict[str, Any]:
    p = c["progress"]
    return {"cycle_id": c["cycle_id"], "status": c["status"], "recipe": c["recipe"], "step": c["step"],
            "step_index": c["step_index"], "steps": c["steps"], "percent": p["percent"],
            "eta_seconds": p["eta_seconds"], "detail": p["detail"], "error": c["error"],
            "candidate": c["candidate"], "gate_passed": c["gate_passed"], "promoted": c["promoted"]}


def progress_hook(engine: AsyncEngine):  # -> NoModelHook
    """A hook adding `{"cycle": {...}, "detail_suffix": "..."}` about the active (else the last) cycle."""

    async def hook() -> dict[str, Any]:
        cycle = await active_cycle(engine)
        if cycle is None:
            last = await list_cycles(engine, limit=1)
            if not last:
                return {"cycle": None, "detail_suffix": "No training cycle has run yet: start one with "
                                                        "`muarl cycle run` or POST /v1/ops/cycles."}
            c = cycle_json(last[0])
            if c["status"] == "failed":
                why = f"The last training cycle ({c['cycle_id']}) failed: {c['error']}."
            elif c["gate_passed"] is False:
                why = f"The last training cycle's candidate ({c['candidate']}) did not pass its gate."
            else:
                why = f"The last training cycle ({c['cycle_id']}) ended {c['status']} without a champion."
            return {"cycle": progress_fields(c), "detail_suffix": why}
        c = cycle_json(cycle)
        fields = progress_fields(c)
        text = (f"The first model is being trained: cycle {c['cycle_id']} ({c['status']}), step {c['step']} "
                f"({c['step_index'] + 1} of {len(c['steps'])}), {fields['percent']:.0f}% done, "
                f"{_eta(fields['eta_seconds'])}.")
        return {"cycle": fields, "detail_suffix": text}

    return hook
