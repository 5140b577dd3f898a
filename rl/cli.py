"""Registers the learning side's commands on the `muarl` CLI (entry point `muarl.cli`).
Each area keeps its commands in its own module and is added here with one line."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add rl commands (`tau`, `tasks`, `eval`, `train`, `experiment`, ...) to `app`."""
    from rl.tau_cli import register as register_tau

    register_tau(app)
    __import__("rl.tasks_cli", fromlist=["register"]).register(app)
    __import__("rl.eval_cli", fromlist=["register"]).register(app)
    __import__("rl.train_cli", fromlist=["register"]).register(app)
    __import__("rl.coldstart_cli", fromlist=["register"]).register(app)
    __import__("rl.experiment_cli", fromlist=["register"]).register(app)
