"""`muarl verl import-checkpoint DIR`: a verl checkpoint back into the product.

DIR is a verl checkpoint step (`checkpoints/{project}/{exp}/global_step_N`, whose `actor/` holds the
FSDP shards) or that `actor/` folder itself. verl's own model merger
(`python -m verl.model_merger merge --backend fsdp`) writes a Hugging Face folder (a LoRA run's
adapter lands in `lora_adapter/` inside it, and that adapter is what gets registered). We add our
`manifest.json` (name, recipe, lineage: the checkpoint, its step, the parent version; the
`view` of a real Qwen3 is the full one) and register the folder as a new immutable version in the
model registry, ready for the gates and vLLM (`--engine vllm`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any


class CheckpointError(ValueError):
    """DIR is not a verl FSDP checkpoint, or the merger failed."""


def actor_dir(path: str | Path) -> Path:
    p = Path(path).resolve()
    for candidate in (p / "actor", p):
        if (candidate / "fsdp_config.json").is_file() and any(candidate.glob("model_world_size_*_rank_0.pt")):
            return candidate
    raise CheckpointError(f"{p} is not a verl FSDP checkpoint (no actor/fsdp_config.json with model shards)")


def merge(path: str | Path, out: str | Path, *, timeout_s: float = 3600) -> Path:
    """Run verl's model merger on the checkpoint's actor shards; returns the folder to register."""
    actor = actor_dir(path)
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        raise CheckpointError(f"{out} exists and is not empty")
    cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", str(actor),
           "--target_dir", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if r.returncode != 0:
        raise CheckpointError(f"verl's model merger failed ({r.returncode}): {(r.stderr or r.stdout)[-2000:]}")
    adapter = out / "lora_adapter"
    return adapter if (adapter / "adapter_config.json").is_file() else out


def step_of(path: Path) -> int | None:
    m = re.search(r"global_step_(\d+)", str(path))
    return int(m.group(1)) if m else None


def write_manifest(folder: Path, checkpoint: Path, *, name: str, recipe: str | None, parent: str | None,
                   training_run: str | None) -> dict[str, Any]:
    manifest = {
        "name": name,
        "recipe": {"name": recipe, "trainer": "verl-0.9.1-grpo"} if recipe else {"trainer": "verl-0.9.1-grpo"},
        "training_run": training_run or str(checkpoint),
        "training": {"checkpoint": str(checkpoint), "global_step": step_of(checkpoint)},
        "parent_version": parent,
        "view": None,  # a real Qwen3 reads the full conversation
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


async def import_checkpoint(path: str | Path, out: str | Path, registry: Any, *, name: str, actor: str,
                            recipe: str | None = None, parent: str | None = None, base: str | None = None,
                            engine: str = "vllm", training_run: str | None = None) -> Any:
    """Merge, write the manifest and register; returns the new version."""
    checkpoint = Path(path).resolve()
    folder = merge(checkpoint, out)
    write_manifest(folder, checkpoint, name=name, recipe=recipe, parent=parent, training_run=training_run)
    return await registry.register_folder(folder, actor=actor, name=name, parent=parent, base=base, engine=engine,
                                          reason=f"imported from verl checkpoint {checkpoint}")
