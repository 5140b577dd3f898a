"""The cycle's calls into the model registry (backend/serving/registry.py) and the gates.

Read the champion, register a trained folder as an immutable version, gate it against the
champion and record the report, promote it (or leave it as the `candidate` alias for ops). Each
call opens its own short-lived engine on the live database (the registry's tables live there;
the store's tables are never touched by these calls).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ACTOR = "cycle"


@contextlib.asynccontextmanager
async def _registry(url: str) -> AsyncIterator[Any]:
    from backend.db.engine import make_engine
    from backend.serving.registry import ModelRegistry

    engine = make_engine(url, null_pool=True)
    try:
        yield ModelRegistry(engine)
    finally:
        await engine.dispose()


async def champion(url: str) -> Any:
    """The champion `Version`, or None before the first promotion."""
    async with _registry(url) as reg:
        return await reg.champion()


async def register(url: str, folder: Path, *, cycle_id: str, recipe: str, parent: str | None) -> str:
    """Register the trained folder; returns the new version's id."""
    async with _registry(url) as reg:
        version = await reg.register_folder(folder, actor=ACTOR, name=f"{recipe}-{cycle_id}", parent=parent,
                                            reason=f"trained by cycle {cycle_id}")
        return version.id


async def record_report(url: str, candidate: str, baseline: str | None, report: dict[str, Any], markdown: str,
                        suite: str | None) -> int:
    """Record the cycle's gate report once: a rerun after a crash between the insert and the step's
    output finds the report this cycle already recorded (reports are append-only) and returns its id."""
    cycle = (report.get("meta") or {}).get("cycle")
    async with _registry(url) as reg:
        if cycle is not None:
            for old in await reg.gate_reports(candidate):
                if old.baseline_id == baseline and (old.report.get("meta") or {}).get("cycle") == cycle:
                    return old.id
        record = await reg.record_gate_report(candidate, baseline, report, markdown, actor=ACTOR, suite=suite)
        return record.id


async def promote(url: str, candidate: str, reason: str, settings: Any) -> None:
    """Make `candidate` the champion: its engine is made to serve it first (the local model server
    loads the folder), then the alias moves, re-checking its passed gate report under the row lock
    (`backend.serving.promotion.promote`). A rerun after the move committed does nothing."""
    from backend.serving.promotion import promote as promote_version
    from backend.serving.registry import AliasConflict

    async with _registry(url) as reg:
        current = await reg.champion()
        if current is not None and current.id == candidate:
            return
        try:
            await promote_version(reg, candidate, reason=reason, actor=ACTOR, settings=settings)
        except AliasConflict:
            current = await reg.champion()
            if current is None or current.id != candidate:
                raise


async def leave_as_candidate(url: str, candidate: str, reason: str) -> None:
    async with _registry(url) as reg:
        if (await reg.aliases()).get("candidate") != candidate:
            await reg.set_candidate(candidate, actor=ACTOR, reason=reason)


def run_gate(ctx: Any, candidate: str, baseline: str | None) -> dict[str, Any]:
    """Play `candidate` against `baseline` (None: the recipe's floor) on the cycle's gate suite,
    record the report in the registry and return it."""
    from rl.pipeline.gate import run_cycle_gate

    return run_cycle_gate(ctx, candidate, baseline)
