"""Serving never loads the learning side: the API, the agent and the service commands import
neither `rl/` nor torch / transformers."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import atexit, sys
def report():
    bad = sorted(m for m in sys.modules if m in ("torch", "transformers") or m == "rl" or m.startswith("rl."))
    sys.stderr.write("LOADED:" + ",".join(bad) + "\\n")
atexit.register(report)
import backend.api.app, backend.agent.loop, backend.tools.mcp_server
sys.argv = ["muarl", "serve", "--help"]
from backend.cli import main
main()
"""


def test_serving_imports_no_learning_code() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--port" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "LOADED:"
