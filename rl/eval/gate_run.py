"""Running the promotion gates: candidate and champion on the same suite, in one run.

`run_gate(tasks, candidate, champion, user, config)` plays both policies on the same tasks with
the same trials and the same simulated customers (one snapshot per store, shared; the same
episode seeds, so the scripted or LLM customer says the same things to both), through
`rl.eval.harness.evaluate`, then decides with `rl.eval.gates.decide`. With `out_dir` it writes
`gate_report.json`, `gate_report.md` and each model's episodes.

`gate_versions(registry, candidate_id, baseline="champion", ...)` is the same for registry
versions: the suite and the floor come from the candidate's recipe (`recipe.gate.suite`,
`recipe.gate.floor`) unless given, both versions are played through their engines over HTTP
(an adapter is loaded first), and the report is stored in the registry (a `gate` event).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from backend.config import Settings, get_settings
from backend.serving.engines import engine_base_url, ensure_served
from backend.serving.registry import GateReportRecord, ModelRegistry, RegistryError, Version
from rl.env import Snapshot, create_snapshot, drop_snapshot
from rl.env.episode import EpisodeLimits
from rl.eval.gate_suite import check_suite
from rl.eval.gates import GateConfig, decide, to_markdown
from rl.eval.harness import evaluate
from rl.policies.base import AgentPolicy
from rl.simulator.base import UserSimulator
from rl.tasks.schema import Task, load_tasks
from rl.tasks.stores import resolve_store


async def run_gate(tasks: list[Task], candidate: AgentPolicy, champion: AgentPolicy | None, user: UserSimulator,
                   config: GateConfig, *, concurrency: int = 8, server_url: str | None = None,
                   out_dir: Path | None = None, limits: EpisodeLimits = EpisodeLimits(),
                   data_dir: Path | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Play both policies on `tasks` and decide (see the module docstring)."""
    check_suite(tasks)
    from backend.db.engine import database_url, normalize_url

    server_url = normalize_url(server_url) if server_url else database_url()
    snapshots: dict[str, Snapshot] = {}
    try:
        for ref in sorted({t.snapshot for t in tasks}):
            snapshots[ref] = await create_snapshot(server_url, resolve_store(ref, data_dir))

        async def play(policy: AgentPolicy, name: str) -> list[Any]:
            result = await evaluate(tasks, policy, user, trials=config.trials, concurrency=concurrency,
                                    server_url=server_url, seed=config.seed, limits=limits, snapshots=snapshots,
                                    out_dir=out_dir / name if out_dir is not None else None)
            return result.trajectories

        cand = await play(candidate, "candidate")
        champ = await play(champion, "champion") if champion is not None else None
    finally:
        for snap in snapshots.values():
            await drop_snapshot(snap)
    report = decide(tasks, cand, champ, config, meta={
        "candidate_policy": candidate.name, "champion_policy": champion.name if champion else None,
        "user": user.name, **(meta or {})})
    if out_dir is not None:
        write_report(report, out_dir)
    return report


def write_report(report: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gate_report.json").write_text(json.dumps(report, indent=1, default=str))
    (out_dir / "gate_report.md").write_text(to_markdown(report))


def gate_recipe(version: Version) -> dict[str, Any]:
    """The gate part of a version's recipe: {"suite": PATH, "floor": F} (either may be missing)."""
    recipe = version.recipe or {}
    gate = recipe.get("gate") if isinstance(recipe.get("gate"), dict) else {}
    return {"suite": gate.get("suite") or recipe.get("gate_suite"),
            "floor": gate.get("floor", recipe.get("gate_floor"))}


async def version_policy(version: Version, settings: Settings) -> AgentPolicy:
    """The version as an agent policy, played through its engine (an adapter is loaded first)."""
    from rl.policies.openai_policy import OpenAIPolicy

    await ensure_served(version, settings)
    return OpenAIPolicy(version.served_name, base_url=engine_base_url(version, settings),
                        api_key=settings.llm_api_key if version.engine == "external" else None)


@dataclass
class GateOutcome:
    report: dict[str, Any]
    record: GateReportRecord
    candidate: Version
    baseline: Version | None


async def gate_versions(registry: ModelRegistry, candidate_id: str, baseline: str = "champion", *, out_dir: Path,
                        user: UserSimulator, actor: str, suite: Path | None = None, config: GateConfig | None = None,
                        concurrency: int = 8, server_url: str | None = None, limits: EpisodeLimits = EpisodeLimits(),
                        data_dir: Path | None = None, settings: Settings | None = None,
                        policies: tuple[AgentPolicy, AgentPolicy | None] | None = None) -> GateOutcome:
    """Gate a registry version against the champion (or `baseline` ID) and record the report.
    `policies` replaces how the two versions are played (tests and the cycle's in-process runs)."""
    settings = settings or get_settings()
    candidate = await registry.require(candidate_id)
    if baseline == "champion":
        champion_id = (await registry.aliases())["champion"]
        base = await registry.require(champion_id) if champion_id else None
    else:
        base = await registry.require(baseline)
    if base is not None and base.id == candidate.id:
        raise RegistryError(f"{candidate.id} is the baseline itself; gate it against another version")
    recipe = gate_recipe(candidate)
    suite_path = suite or (Path(recipe["suite"]) if recipe["suite"] else None)
    if suite_path is None:
        raise RegistryError(f"{candidate.id}'s recipe names no gate suite (recipe.gate.suite); pass --suite FILE")
    tasks = load_tasks(suite_path)
    config = config or GateConfig.from_settings()
    if config.floor is None and recipe["floor"] is not None:
        config = replace(config, floor=float(recipe["floor"]))
    if policies is None:
        policies = (await version_policy(candidate, settings),
                    await version_policy(base, settings) if base is not None else None)
    report = await run_gate(tasks, policies[0], policies[1], user, config, concurrency=concurrency,
                            server_url=server_url, out_dir=out_dir, limits=limits, data_dir=data_dir,
                            meta={"candidate": candidate.id, "baseline": base.id if base else None,
                                  "suite": str(suite_path)})
    record = await registry.record_gate_report(candidate.id, base.id if base else None, report,
                                               to_markdown(report), actor=actor, suite=str(suite_path))
    report["report_id"] = record.id
    write_report(report, out_dir)
    return GateOutcome(report, record, candidate, base)
