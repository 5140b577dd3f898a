"""Promotion and rollback as ops and the training cycle ask for them.

`promote(registry, id, reason=..., actor=..., settings=...)` refuses early when the version
has no passed gate report against the current champion (unless `skip_gates`), then makes the
version's engine serve it (an adapter is loaded under its versioned name) and only then
switches the alias: customers never get a name the engine does not know. `rollback` does the
same for the `previous` version. The alias move itself re-checks the gates under the row lock
(`ModelRegistry.switch_champion`), so a champion that changed meanwhile is noticed.
"""

from __future__ import annotations

from backend.config import Settings
from backend.serving.engines import ensure_served
from backend.serving.registry import AliasChange, AliasConflict, GatesNotPassed, ModelRegistry


async def promote(registry: ModelRegistry, version_id: str, *, reason: str, actor: str, settings: Settings,
                  skip_gates: bool = False) -> AliasChange:
    version = await registry.require(version_id)
    if not skip_gates and await registry.passed_gate(version_id) is None:
        champion = (await registry.aliases())["champion"]
        against = f"the champion {champion}" if champion else "the floor (there is no champion yet)"
        raise GatesNotPassed(f"{version_id} has no passed gate report against {against}; run "
                             f"`muarl gate run --candidate {version_id} --out DIR` first, or promote with "
                             "--skip-gates (recorded in the event)")
    await ensure_served(version, settings)
    return await registry.switch_champion(version_id, actor=actor, reason=reason, skip_gates=skip_gates)


async def rollback(registry: ModelRegistry, *, reason: str, actor: str, settings: Settings) -> AliasChange:
    previous = (await registry.aliases())["previous"]
    if previous is None:
        raise AliasConflict("there is no previous version to roll back to")
    await ensure_served(await registry.require(previous), settings)
    return await registry.rollback(actor=actor, reason=reason)
