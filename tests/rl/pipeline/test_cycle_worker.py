"""Cycles through a real `muarl worker` and a real broker (embedded Redis), driven by the CLI.

The first cycle (no champion) cold-starts a `smoke` model, gates it against the floor and
promotes it; `muarl cycle run --wait` exits 0 and ends with the JSON line. The second cycle
trains GRPO from that champion, anchored to the teacher's conversations on its own snapshot; its
worker is killed with SIGKILL (whole process group) in the middle of GRPO, a new worker resumes
the cycle from GRPO's last checkpoint and finishes it, and no database of the cycle or of the
killed worker is left behind."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text

from backend.config import PROJECT_ROOT
from backend.cycles import cycle_json, get_cycle
from backend.db.engine import admin_connection, make_engine
from backend.serving.registry import ModelRegistry
from backend.store.checksum import store_checksum
from tests.rl.pipeline.conftest import cycle_env, wait_for

pytestmark = pytest.mark.timeout(900)


def _cli(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _state(url: str, cycle_id: str) -> dict:
    async def read() -> dict:
        engine = make_engine(url, null_pool=True)
        try:
            return cycle_json(await get_cycle(engine, cycle_id))
        finally:
            await engine.dispose()

    return asyncio.run(read())


async def _checksum(url: str) -> dict[str, str]:
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            return await store_checksum(conn)
    finally:
        await engine.dispose()


async def _databases(url: str, like: str) -> list[str]:
    async with admin_connection(url) as admin:
        rows = await admin.execute(text("SELECT datname FROM pg_database WHERE datname LIKE :l"), {"l": like})
        return [r[0] for r in rows]


async def _champion(url: str):  # noqa: ANN202
    engine = make_engine(url, null_pool=True)
    try:
        return await ModelRegistry(engine).champion()
    finally:
        await engine.dispose()


def _grpo_step(var_dir: Path, cycle_id: str) -> int:
    latest = var_dir / "cycles" / cycle_id / "train" / "grpo" / "candidate" / "checkpoints" / "latest"
    try:
        return int(latest.read_text().strip().removeprefix("step_"))
    except (OSError, ValueError):
        return 0


def test_cycle_through_worker_survives_kill_9(live_db: str, var_dir: Path, broker: str, workers,
                                              model_server: str) -> None:
    env = cycle_env(live_db, var_dir, broker, MUARL_MODEL_SERVER_URL=model_server)
    before = asyncio.run(_checksum(live_db))
    first_worker = workers.start(MUARL_MODEL_SERVER_URL=model_server)

    # 1. the first cycle: cold start, gated against the floor, promoted
    done = _cli(env, "cycle", "run", "--recipe", "smoke", "--wait")
    assert done.returncode == 0, done.stderr[-3000:] + (var_dir / "worker.log").read_text()[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print("first cycle:", [(e["event"], e.get("step"), e.get("seconds"))
                           for e in _state(live_db, result["cycle_id"])["events"]])
    assert set(result) >= {"cycle_id", "status", "candidate", "gate_passed", "promoted"}
    assert result["status"] == "succeeded" and result["gate_passed"] is True and result["promoted"] is True
    champion = asyncio.run(_champion(live_db))
    assert champion is not None and champion.id == result["candidate"]
    import httpx

    served = [m["id"] for m in httpx.get(f"{model_server}/models", timeout=10).json()["data"]]
    assert champion.served_name in served  # loaded on its engine before the alias moved

    # 2. the second cycle: GRPO from the champion, its worker killed in the middle of GRPO
    queued = _cli(env, "cycle", "run", "--recipe", "smoke", "--set", "grpo.steps=6", "--set", "grpo.save_every=1",
                  "--set", "grpo.anchor_coef=1.0")
    assert queued.returncode == 0, queued.stderr
    second = json.loads(queued.stdout.strip().splitlines()[-1])["cycle_id"]
    wait_for(lambda: _grpo_step(var_dir, second) >= 2, 400, "GRPO's second checkpoint")
    first_worker.kill()  # SIGKILL to the worker and its pool child
    killed_at = _grpo_step(var_dir, second)
    assert killed_at < 6, "GRPO finished before the kill; the test needs more steps"
    state = _state(live_db, second)
    assert state["status"] == "running" and state["step"] == "train"

    workers.start(MUARL_MODEL_SERVER_URL=model_server)  # a restarted worker resumes the cycle
    final = wait_for(
        lambda: (s := _state(live_db, second))["status"] in ("succeeded", "failed") and s, 500,
        "the resumed cycle to finish")
    print("second cycle:", [(e["event"], e.get("step"), e.get("seconds")) for e in final["events"]])
    assert final["status"] == "succeeded", final["error"]
    events = [e["event"] for e in final["events"]]
    assert "redispatched" in events
    resumed = [e for e in final["events"] if e["event"] == "train.resumed"]
    assert resumed and int(resumed[0]["checkpoint"].removeprefix("step_")) >= 2
    assert final["attempts"]["train"] == 2
    metrics = (var_dir / "cycles" / second / "train" / "grpo" / "candidate" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(m)["step"] for m in metrics] == [1, 2, 3, 4, 5, 6]  # no step redone from zero
    # anchored to the teacher's conversations on this cycle's cold-start tasks, as the recipe says
    assert all(json.loads(m)["anchor_tokens"] > 0 and json.loads(m)["anchor_nll"] > 0 for m in metrics)
    assert (var_dir / "cycles" / second / "train" / "coldstart" / "filtered.jsonl").exists()
    assert final["champion"] == champion.id and final["candidate"] not in (None, champion.id)
    assert isinstance(final["gate_passed"], bool)

    status = _cli(env, "cycle", "status", "--json")
    assert status.returncode == 0
    listed = json.loads(status.stdout)
    assert listed["active"] is None and [c["cycle_id"] for c in listed["cycles"]][:2] == [second, result["cycle_id"]]

    # nothing left behind: the cycle's snapshot, its sandboxes, the killed worker's sandboxes
    for cycle_id in (result["cycle_id"], second):
        assert asyncio.run(_databases(live_db, f"muarl\\_cycle\\_{cycle_id}%")) == []
    assert asyncio.run(_checksum(live_db)) == before, "a cycle wrote to the live store"
