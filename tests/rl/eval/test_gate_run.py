"""A real gate run on a small held-out suite (real sandboxes, scripted customers): the oracle as
candidate against the hasty baseline as champion passes, is recorded in the registry and unlocks
promotion; the reverse fails on non-inferiority and safety. Then `muarl gate run` as a real command
on registry versions served by an engine over HTTP writes the contract files and records them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.config import PROJECT_ROOT
from backend.db.engine import make_engine
from backend.db.testing import TestDatabases
from backend.serving.registry import ModelRegistry, NewVersion
from backend.store.seed import generate_store
from rl.eval.gate_run import gate_versions
from rl.eval.gate_suite import build_gate_suite
from rl.eval.gates import GateConfig
from rl.policies.base import make_policy
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.schema import save_tasks
from tests.backend.serving.conftest import write_model_folder
from tests.backend.serving.fake_engine import FakeEngine


def write_suite(path: Path, n: int, n_safety: int) -> Path:
    save_tasks(path, build_gate_suite(generate_store(0, 80), snapshot="synthetic:0:80", n=n, n_safety=n_safety,
                                      seed=0))
    return path


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "gate_suite.json", 4, 6)


@pytest.fixture
async def registry(empty_db: str) -> AsyncIterator[ModelRegistry]:
    engine = make_engine(empty_db, null_pool=True)
    yield ModelRegistry(engine)
    await engine.dispose()


async def test_oracle_passes_against_hasty_and_not_the_other_way(registry: ModelRegistry, suite_file: Path,
                                                                 test_dbs: TestDatabases, tmp_path: Path) -> None:
    manifest = {"recipe": {"name": "tiny", "gate": {"suite": str(suite_file), "floor": 0.5}}}
    hasty_v = await registry.register_folder(write_model_folder(tmp_path / "hasty", manifest=manifest), actor="t")
    oracle_v = await registry.register_folder(write_model_folder(tmp_path / "oracle", manifest=manifest),
                                              actor="t", parent=hasty_v.id)
    await registry.switch_champion(hasty_v.id, actor="t", reason="baseline", skip_gates=True)
    config = GateConfig(trials=2, iterations=500)
    out = tmp_path / "gate"
    outcome = await gate_versions(registry, oracle_v.id, out_dir=out, user=ScriptedCustomer(), actor="test",
                                  config=config, concurrency=4, server_url=test_dbs.server_url,
                                  policies=(make_policy("oracle"), make_policy("hasty")))
    report = outcome.report
    assert report["passed"], [c for c in report["checks"] if not c["passed"]]
    assert outcome.baseline is not None and outcome.baseline.id == hasty_v.id
    assert report["pass_hat_k"]["candidate"]["1"]["value"] == 1.0
    assert report["pass_hat_k"]["champion"]["1"]["value"] < 1.0
    assert report["safety"]["champion_violations"] > 0  # hasty tries another customer's order
    saved = json.loads((out / "gate_report.json").read_text())
    assert saved["passed"] is True and saved["report_id"] == outcome.record.id
    assert (out / "gate_report.md").read_text().startswith("# Gate report: PASSED")
    assert (out / "candidate" / "episodes.jsonl").is_file() and (out / "champion" / "episodes.jsonl").is_file()
    # the same customers for both: every episode seed matches
    seeds = [[json.loads(x)["seed"] for x in (out / m / "episodes.jsonl").read_text().splitlines()]
             for m in ("candidate", "champion")]
    assert sorted(seeds[0]) == sorted(seeds[1])
    assert (await registry.passed_gate(oracle_v.id)) is not None
    await registry.switch_champion(oracle_v.id, actor="t", reason="passed its gates")

    # the same episodes with the roles swapped: hasty as candidate fails, on safety whatever its score
    from rl.env.episode import Trajectory
    from rl.eval.gates import decide
    from rl.tasks.schema import load_tasks

    played = {m: [Trajectory.model_validate_json(x) for x in (out / m / "episodes.jsonl").read_text().splitlines()]
              for m in ("candidate", "champion")}
    reverse = decide(load_tasks(suite_file), played["champion"], played["candidate"], config)
    failed = {c["name"] for c in reverse["checks"] if not c["passed"]}
    assert not reverse["passed"] and "safety" in failed
    assert reverse["failure_causes"]["candidate"]


def test_gate_run_command_contract(empty_db: str, tmp_path: Path) -> None:
    import asyncio

    suite_file = write_suite(tmp_path / "small_suite.json", 2, 1)

    async def setup() -> tuple[str, str]:
        engine = make_engine(empty_db, null_pool=True)
        reg = ModelRegistry(engine)
        try:
            champ = await reg.register(NewVersion(name="champ", artifact_uri=llm.url, engine="external",
                                                  served_name="champ-model"), actor="t")
            cand = await reg.register(NewVersion(name="cand", artifact_uri=llm.url, engine="external",
                                                 served_name="cand-model",
                                                 recipe={"gate": {"suite": str(suite_file)}}), actor="t")
            await reg.switch_champion(champ.id, actor="t", reason="first", skip_gates=True)
            return champ.id, cand.id
        finally:
            await engine.dispose()

    with FakeEngine() as llm:
        champ_id, cand_id = asyncio.run(setup())
        exe = Path(sys.executable).with_name("muarl")
        cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from backend.cli import main; main()"]
        env = {**os.environ, "DATABASE_URL": empty_db, "PYTHONPATH": str(PROJECT_ROOT)}
        out = tmp_path / "gate"
        r = subprocess.run([*cmd, "gate", "run", "--candidate", cand_id, "--out", str(out), "--trials", "1",
                            "--max-turns", "4", "--concurrency", "4"], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        assert {q["model"] for q in llm.requests} == {"cand-model", "champ-model"}
        missing = subprocess.run([*cmd, "gate", "run", "--candidate", "v999", "--out", str(tmp_path / "x")],
                                 env=env, capture_output=True, text=True, timeout=300)
    report = json.loads((out / "gate_report.json").read_text())
    assert isinstance(report["passed"], bool) and report["checks"] and report["meta"]["baseline"] == champ_id
    assert all({"name", "value", "threshold", "passed"} <= set(c) for c in report["checks"])
    assert (out / "gate_report.md").read_text().startswith("# Gate report: ")

    async def recorded() -> list:
        engine = make_engine(empty_db, null_pool=True)
        try:
            return await ModelRegistry(engine).gate_reports(cand_id)
        finally:
            await engine.dispose()

    reports = asyncio.run(recorded())
    assert len(reports) == 1 and reports[0].baseline_id == champ_id and reports[0].passed is report["passed"]
    assert missing.returncode == 1 and "no model version 'v999'" in missing.stderr
