"""`muarl model-server` (the local OpenAI-compatible engine, rl/serving/app.py) and `muarl adapters`
(LoRA adapters in PEFT format for checkpoints trained here, rl/serving/lora.py).

- `model-server [--host 127.0.0.1] [--port 8001] [--model NAME=PATH ...]`: serves model or adapter
  folders; more are loaded at run time with `POST /v1/load_lora_adapter`. Greedy unless a request
  (or `--temperature`) says otherwise.
- `adapters extract BASE TUNED OUT [--rank 8]`: the adapter closest to what training changed.
- `adapters random BASE OUT [--rank 8] [--seed 0]`: an adapter whose outputs differ from the base's.
Both print one JSON object (`path`, `base`, `rank`, `layers`). Bad input exits with code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

adapters_app = typer.Typer(help="LoRA adapters (PEFT format) for checkpoints trained here.", no_args_is_help=True)
console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command("model-server")(model_server)
    app.add_typer(adapters_app, name="adapters")


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(2)


def model_server(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8001,
    model: Annotated[list[str] | None, typer.Option(
        "--model", help="NAME=PATH (or PATH, served under its folder name) to serve from the start")] = None,
    temperature: Annotated[float, typer.Option(help="sampling temperature when a request names none (0: greedy)")]
    = 0.0,
    max_tokens: Annotated[int, typer.Option(help="new tokens per reply when a request names no max_tokens")] = 256,
    max_batch: Annotated[int, typer.Option(help="most requests generated together")] = 64,
    threads: Annotated[int, typer.Option(help="torch CPU threads")] = 2,
) -> None:
    """Serve checkpoints trained here over an OpenAI-compatible API (vLLM-shaped load/unload)."""
    import asyncio

    import torch
    import uvicorn

    from rl.serving.app import create_app
    from rl.serving.engine import EngineError, ModelPool

    torch.set_num_threads(threads)
    pool = ModelPool(temperature=temperature, max_tokens=max_tokens, max_batch=max_batch)
    for spec in model or []:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = Path(spec).name, spec
        try:
            asyncio.run(pool.load(name, path))
        except EngineError as e:
            raise _fail(f"--model {spec}: {e.message}") from None
    console.print(f"model server on http://{host}:{port}/v1 serving {sorted(pool.models) or 'nothing yet'}")
    uvicorn.run(create_app(pool), host=host, port=port, log_level="warning")


@adapters_app.command("extract")
def extract(
    base: Annotated[Path, typer.Argument(help="the base model folder")],
    tuned: Annotated[Path, typer.Argument(help="a model folder trained from BASE")],
    out: Annotated[Path, typer.Argument(help="adapter folder to write")],
    rank: Annotated[int, typer.Option(min=1, help="LoRA rank")] = 8,
) -> None:
    """Write the rank-r LoRA adapter closest to TUNED - BASE (per linear layer, by SVD)."""
    from rl.serving.lora import AdapterError, extract_adapter

    base_model, tuned_model = _load(base), _load(tuned)
    try:
        path = extract_adapter(base_model, tuned_model, out, rank=rank, base_path=str(base.resolve()),
                               extra={"muarl": {"tuned_from": str(tuned.resolve())}})
    except AdapterError as e:
        raise _fail(str(e)) from None
    _report(path)


@adapters_app.command("random")
def random(
    base: Annotated[Path, typer.Argument(help="the base model folder")],
    out: Annotated[Path, typer.Argument(help="adapter folder to write")],
    rank: Annotated[int, typer.Option(min=1, help="LoRA rank")] = 8,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
    strength: Annotated[float, typer.Option(min=0.0, help="norm of each update relative to the layer's")] = 0.5,
) -> None:
    """Write a random LoRA adapter for BASE (its replies differ from the base model's)."""
    from rl.serving.lora import AdapterError, random_adapter

    try:
        path = random_adapter(_load(base), out, rank=rank, seed=seed, strength=strength,
                              base_path=str(base.resolve()))
    except AdapterError as e:
        raise _fail(str(e)) from None
    _report(path)


def _load(folder: Path):  # noqa: ANN202 - a transformers model
    from rl.models.tiny import load_model_folder

    if not (folder / "config.json").is_file():
        raise _fail(f"{folder} is not a model folder (no config.json)")
    return load_model_folder(folder)[0]


def _report(path: Path) -> None:
    from rl.serving.lora import read_adapter

    config, weights = read_adapter(path)
    print(json.dumps({"path": str(path.resolve()), "base": config["base_model_name_or_path"], "rank": config["r"],
                      "layers": len(weights)}))
