"""The `muarl tau` contract, checked from outside: a real `muarl` process per command, on the
test database server, reading the tau-bench data folder."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from backend.db import testing as test_databases
from backend.db.engine import admin_connection


def _muarl() -> list[str]:
    exe = Path(sys.executable).with_name("muarl")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from backend.cli import main; main()"]


def _env() -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": test_databases.test_server_url(), "MUARL_LOG_LEVEL": "INFO"}


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*_muarl(), *args], env=_env(), capture_output=True, text=True, timeout=timeout)


def _made_databases(stderr: str) -> list[str]:
    return re.findall(r"snapshot\.created\s+name=(\w+)", stderr)


async def _leftovers(snapshot_names: list[str]) -> list[str]:
    assert snapshot_names
    async with admin_connection(test_databases.test_server_url()) as admin:
        rows = await admin.execute(text("SELECT datname FROM pg_database"))
        return [r[0] for r in rows if any(r[0].startswith(s) for s in snapshot_names)]


async def test_replay_dev_split(tmp_path: Path, tau_data_dir: Path) -> None:
    out = tmp_path / "replay.jsonl"
    proc = _run("tau", "replay", "--domain", "retail", "--split", "dev", "--data-dir", str(tau_data_dir),
                "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == ""
    tasks = json.loads((tau_data_dir / "tau1" / "retail" / "tasks_dev.json").read_text())
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [x["index"] for x in lines] == list(range(len(tasks)))
    for task, line in zip(tasks, lines, strict=True):
        assert set(line) == {"index", "reward", "outputs", "changes"}
        assert line["reward"] == 1.0
        assert len(line["outputs"]) == len(task["actions"])
        assert set(line["changes"]) == {"users", "orders", "products"}
        # a successful write returns the updated order; the final change set holds its last state
        last: dict[str, dict] = {}
        for action, output in zip(task["actions"], line["outputs"], strict=True):
            if output.startswith("{") and "order_id" in action["kwargs"]:
                last[action["kwargs"]["order_id"]] = json.loads(output)
        for oid, record in last.items():
            assert line["changes"]["orders"][oid] == record
        assert set(line["changes"]["orders"]) == set(last)
    assert await _leftovers(_made_databases(proc.stderr)) == []


async def test_call_runs_lines_in_order_on_one_sandbox(tmp_path: Path, tau_data_dir: Path,
                                                       tau_retail: dict) -> None:
    oid, order = next((o, v) for o, v in tau_retail["orders"].items() if v["status"] == "pending")
    uid = order["user_id"]
    calls = [
        {"name": "get_user_details", "arguments": {"user_id": uid}},
        {"name": "cancel_pending_order", "arguments": {"order_id": oid, "reason": "no longer needed"}},
        "this line is not JSON",
        {"name": "cancel_pending_order", "arguments": {"order_id": oid, "reason": "no longer needed"}},
        {"name": "get_order_details", "arguments": {"order_id": oid}},
        {"name": "no_such_tool", "arguments": {}},
        {"name": "calculate", "arguments": {"expression": "2.675 * 1"}},
        {"name": "get_order_details", "arguments": {"order_id": 5}},
        {"name": "get_order_details", "arguments": {}},
        {"name": "transfer_to_human_agents", "arguments": {"summary": "bye"}},
        [1, 2],
    ]
    calls_file = tmp_path / "calls.jsonl"
    calls_file.write_text("\n".join(c if isinstance(c, str) else json.dumps(c) for c in calls) + "\n")
    out = tmp_path / "out.jsonl"
    proc = _run("tau", "call", "--domain", "retail", "--data-dir", str(tau_data_dir), "--calls",
                str(calls_file), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs = [json.loads(line)["output"] for line in out.read_text().splitlines()]
    assert len(outputs) == len(calls)
    assert json.loads(outputs[0])["orders"] == tau_retail["users"][uid]["orders"]
    cancelled = json.loads(outputs[1])
    assert cancelled["status"] == "cancelled" and cancelled["cancel_reason"] == "no longer needed"
    assert outputs[2].startswith("Error: ")
    assert outputs[3] == "Error: non-pending order cannot be cancelled"  # state carried over
    assert json.loads(outputs[4]) == cancelled
    assert outputs[5] == "Unknown action no_such_tool"
    assert outputs[6] == "2.67"
    assert outputs[7].startswith("Error: ")
    assert outputs[8] == "Error: GetOrderDetails.invoke() missing 1 required positional argument: 'order_id'"
    assert outputs[9] == "Transfer successful"
    assert outputs[10].startswith("Error: ")
    assert await _leftovers(_made_databases(proc.stderr)) == []


def test_bad_domain_and_missing_data_are_clear_errors(tmp_path: Path) -> None:
    proc = _run("tau", "replay", "--domain", "airline", "--split", "dev", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "only 'retail'" in proc.stderr
    proc = _run("tau", "replay", "--split", "dev", "--data-dir", str(tmp_path), "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "not found" in proc.stderr
    proc = _run("tau", "replay", "--split", "nope", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_interrupted_replay_drops_its_databases(tmp_path: Path, tau_data_dir: Path, sig: int) -> None:
    proc = subprocess.Popen(
        [*_muarl(), "tau", "replay", "--split", "train", "--data-dir", str(tau_data_dir),
         "--out", str(tmp_path / "train.jsonl")],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr = ""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until the snapshot exists
            line = proc.stderr.readline()
            stderr += line
            if "snapshot.created" in line or (not line and proc.poll() is not None):
                break
        time.sleep(1.5)  # replay under way: sandboxes in use, refills and drops in flight
        proc.send_signal(sig)
        rest = proc.communicate(timeout=120)[1]
        stderr += rest
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-3000:]
    names = _made_databases(stderr)
    assert await _leftovers(names) == []
