"""Scratch databases left by a killed process are found and dropped, and only those: a real
process makes a snapshot and a sandbox pool and is killed with SIGKILL; the sweep drops its
databases and leaves those of this (live) process alone."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

from sqlalchemy import text

from backend.config import PROJECT_ROOT
from backend.db.engine import admin_connection
from backend.db.testing import TestDatabases
from backend.store.seed import generate_store
from rl.env import SandboxPool, create_snapshot, drop_snapshot
from rl.env.ownership import database_owner, hold_owner_lock, sweep_orphan_databases

_CHILD = """
import asyncio, sys
from backend.store.seed import generate_store
from rl.env import SandboxPool, create_snapshot

async def main():
    snap = await create_snapshot(sys.argv[1], generate_store(3, 8))
    pool = await SandboxPool(snap, size=3, warm=False).start()
    print("SNAPSHOT", snap.name, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


async def _names(server_url: str, prefix: str) -> set[str]:
    async with admin_connection(server_url) as admin:
        rows = await admin.execute(text("SELECT datname FROM pg_database WHERE starts_with(datname, :p)"),
                                   {"p": prefix})
        return {r[0] for r in rows}


def test_owner_token_parsing() -> None:
    assert database_owner("muarl_snap_o0000002a1234") == 0x2A
    # a sandbox's owner is the last token (its snapshot may belong to another process)
    assert database_owner("muarl_snap_o0000002a1234_o000000ff9999_3") == 0xFF
    assert database_owner("muarl_cycle_c20261201_o000000ffabcd_12") == 0xFF
    assert database_owner("t_1234abcd_live_3") is None and database_owner("muarl_cycle_c2026120112") is None


async def test_sweep_drops_only_databases_of_dead_processes(test_dbs: TestDatabases) -> None:
    server = test_dbs.server_url
    mine = await create_snapshot(server, generate_store(4, 6))
    pool = await SandboxPool(mine, size=2, warm=False).start()
    child = subprocess.Popen([sys.executable, "-c", _CHILD, server], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    try:
        line = ""
        while not line.startswith("SNAPSHOT "):  # (log lines come first)
            line = await asyncio.to_thread(child.stdout.readline)
            assert line, "the child process ended early"
        theirs = line.split()[1]
        assert theirs.startswith("muarl_snap_o"), theirs
        left = await _names(server, theirs)
        assert len(left) == 4  # the snapshot and 3 sandboxes
        early = await sweep_orphan_databases(server)  # (other runs' orphans may go) their owner is alive:
        assert not [n for n in early if n.startswith((theirs, mine.name))]
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        assert await _names(server, theirs) == left  # a kill leaves them behind...
        await asyncio.sleep(0.5)  # the server notices the closed connection (and frees its lock)
        dropped = await sweep_orphan_databases(server)
        assert left <= set(dropped)  # ...and the sweep finds and drops them all
        assert await _names(server, theirs) == set()
        # this process's snapshot and sandboxes are untouched
        assert await _names(server, mine.name) == {mine.name} | pool.databases
        assert hold_owner_lock(server) == database_owner(mine.name)
    finally:
        if child.poll() is None:
            child.kill()
        await pool.close()
        await drop_snapshot(mine)
