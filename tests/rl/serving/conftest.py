"""Serving fixtures: the tiny checkpoint and adapter trained once per session (tiny_checkpoint.py) and
a helper that runs a command line as a server process until its health URL answers."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.rl.serving.tiny_checkpoint import build_checkpoints

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(base model folder, LoRA adapter folder)."""
    return build_checkpoints(tmp_path_factory.mktemp("serving") / "ckpt")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running(cmd: list[str], health: str, *, timeout_s: float, env: dict[str, str] | None = None,
            log: Path | None = None) -> Iterator[subprocess.Popen]:
    """Start `cmd`, wait until GET `health` answers 200, stop it (and its children) afterwards."""
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                tail = log.read_text()[-3000:] if log else ""
                raise RuntimeError(f"{cmd[:4]} exited with {proc.returncode} before it was ready\n{tail}")
            try:
                if httpx.get(health, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{cmd[:4]} not ready after {timeout_s} s")
            time.sleep(0.5)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 15)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(10)
        if log:
            out.close()
