"""Stopping the servers a benchmark started: SIGTERM to all, then wait, then SIGKILL what is left."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence


def stop_all(procs: Sequence[subprocess.Popen], wait_s: float = 10.0) -> None:
    """Terminate every process first (so they stop side by side), then reap each, killing laggards."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(wait_s)
        except subprocess.TimeoutExpired:
            p.kill()
