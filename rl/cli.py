"""Registers the learning side's commands on the `muarl` CLI (entry point `muarl.cli`).
Each area keeps its commands in its own module and is added here with one line."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add rl commands (`tau`, `tasks`, `eval`, `train`, `coldstart`, `experiment`, `gate`, `worker`, `beat`,
    `cycle`, `model-server`, `adapters`, `verl`) to `app`."""
    from rl import coldstart_cli, cycle_cli, eval_cli, experiment_cli, gate_cli, tasks_cli, tau_cli, train_cli, verl_cli

    for module in (tau_cli, tasks_cli, eval_cli, train_cli, coldstart_cli, experiment_cli, gate_cli, cycle_cli,
                   verl_cli):
        module.register(app)
    from rl.serving import cli as serving_cli  # `model-server`, `adapters`

    serving_cli.register(app)
