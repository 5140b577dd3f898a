"""What a model folder written by our pipeline says about itself, read without torch.

`read_model_folder(path)` finds whether the folder is a full model (config.json + weights) or a
LoRA adapter (adapter_config.json), reads its `manifest.json` (view, recipe, training, lineage),
and hashes every file: the registry records each file's sha256 and one digest over all of them,
so a version always names exactly the bytes it was registered with.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
_CHUNK = 1 << 20


class ArtifactError(ValueError):
    """The path is not a model folder we can register."""


@dataclass
class ModelFolder:
    path: Path
    kind: str  # full | adapter
    manifest: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    sha256: str = ""

    @property
    def recipe(self) -> dict[str, Any] | None:
        recipe = self.manifest.get("recipe")
        if isinstance(recipe, dict):
            return recipe
        if isinstance(recipe, str):
            return {"name": recipe}
        return None

    @property
    def training(self) -> dict[str, Any] | None:
        training = self.manifest.get("training")
        return training if isinstance(training, dict) else None

    @property
    def training_run(self) -> str | None:
        run = self.manifest.get("training_run") or (self.training or {}).get("run")
        return str(run) if run else None

    @property
    def store_snapshot(self) -> str | None:
        snap = self.manifest.get("store_snapshot") or self.manifest.get("snapshot")
        return str(snap) if snap else None

    @property
    def view(self) -> dict[str, Any] | None:
        view = self.manifest.get("view")
        return view if isinstance(view, dict) else None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def folder_digest(files: dict[str, str]) -> str:
    """One sha256 over (path, sha256) of every file, in path order."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(f"{rel}\0{files[rel]}\n".encode())
    return digest.hexdigest()


def read_model_folder(path: str | Path) -> ModelFolder:
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise ArtifactError(f"{path} is not a folder (a model folder has config.json and safetensors weights, "
                            "an adapter folder adapter_config.json)")
    if (folder / "adapter_config.json").is_file():
        kind = "adapter"
    elif (folder / "config.json").is_file():
        kind = "full"
    else:
        raise ArtifactError(f"{folder} has neither config.json (a full model) nor adapter_config.json (an adapter)")
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("*.bin")):
        raise ArtifactError(f"{folder} has no weights (*.safetensors)")
    manifest: dict[str, Any] = {}
    if (folder / MANIFEST).is_file():
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
        except ValueError as e:
            raise ArtifactError(f"{folder / MANIFEST} is not valid JSON: {e}") from None
        if not isinstance(manifest, dict):
            raise ArtifactError(f"{folder / MANIFEST} must hold a JSON object")
    files = {p.relative_to(folder).as_posix(): file_sha256(p)
             for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.startswith(".")}
    return ModelFolder(folder, kind, manifest, files, folder_digest(files))
