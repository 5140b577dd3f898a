"""`muarl models` contracts, run as the real command in a subprocess on a real database: register
prints one JSON object with "id", list --json an array with aliases, promote refuses (exit 1)
without a passed gate report against the champion and accepts --skip-gates (the event says so),
rollback restores the previous champion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.config import PROJECT_ROOT
from backend.db.engine import make_engine
from backend.serving.registry import ModelRegistry
from tests.backend.serving.conftest import write_model_folder
from tests.backend.serving.fake_engine import FakeEngine


def muarl(db_url: str, engine_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("muarl")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from backend.cli import main; main()"]
    env = {**os.environ, "DATABASE_URL": db_url, "MUARL_MODEL_SERVER_URL": engine_url,
           "PYTHONPATH": str(PROJECT_ROOT), "USER": "ann"}
    return subprocess.run([*cmd, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def engine_server() -> Iterator[FakeEngine]:
    with FakeEngine(serves=["first"]) as server:
        yield server


async def test_models_commands(empty_db: str, engine_server: FakeEngine, tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return muarl(empty_db, engine_server.url, "models", *args)

    r = run("register", str(write_model_folder(tmp_path / "m1")), "--name", "tiny", "--served-name", "first")
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    assert first["id"] == "v1" and first["kind"] == "full" and first["served_name"] == "first"
    r = run("register", str(write_model_folder(tmp_path / "lora", adapter=True)), "--base", "v1", "--parent", "v1")
    assert r.returncode == 0, r.stderr
    second = json.loads(r.stdout)
    assert second["kind"] == "adapter" and second["base_version_id"] == "v1" and second["name"] == "lora"
    r = run("register", str(tmp_path / "nothing-here"))
    assert r.returncode == 1 and "not a folder" in r.stderr and r.stdout == ""

    r = run("promote", "v1", "--reason", "first model")
    assert r.returncode == 1 and "no passed gate report" in r.stderr
    r = run("promote", "v1", "--reason", "bootstrap", "--skip-gates")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["event"]["details"]["skip_gates"] is True

    engine = make_engine(empty_db, null_pool=True)
    try:
        await ModelRegistry(engine).record_gate_report("v2", "v1", {"passed": True, "checks": []}, actor="gate")
    finally:
        await engine.dispose()
    r = run("promote", "v2", "--reason", "passed its gates")
    assert r.returncode == 0, r.stderr
    assert engine_server.loads == [{"lora_name": second["served_name"], "lora_path": second["artifact_uri"]}]

    listed = json.loads(run("list", "--json").stdout)
    assert [(v["id"], v["name"], v["aliases"]) for v in listed] == [("v1", "tiny", ["previous"]),
                                                                     ("v2", "lora", ["champion"])]
    assert all(v["created_at"] for v in listed)
    assert "champion" in run("list").stdout

    r = run("rollback", "--reason", "complaints")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["champion"] == "v1"
    r = run("rollback", "--reason", "again")
    assert r.returncode == 1 and "no previous version" in r.stderr
    shown = json.loads(run("show", "v2").stdout)
    assert [e["kind"] for e in shown["events"]] == ["rollback", "promote", "gate", "register"]
    assert shown["events"][1]["actor"] == "cli:ann" and shown["gate_reports"][0]["passed"] is True
