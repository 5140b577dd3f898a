"""LoRA adapters in PEFT format, without `peft`: an adapter folder holds `adapter_config.json` and
`adapter_model.safetensors` with keys `base_model.model.<module>.lora_A.weight` (rank x in) and
`...lora_B.weight` (out x rank), so vLLM (`POST /v1/load_lora_adapter`) and our local engine read the
same folder.

`extract_adapter` makes one from training done here: the best rank-r approximation (SVD) of the
difference between a tuned checkpoint and its base, per linear layer of the attention and MLP blocks
(what a LoRA can express; changes to embeddings and norms are not carried). `random_adapter` makes
one whose outputs visibly differ from the base's (for tests and benchmarks of the serving path).
`apply_adapter` merges an adapter into a loaded base model (W += scale * B @ A), which is how the
local engine serves it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
PREFIX = "base_model.model."
# the linear layers of a Qwen3 decoder block (PEFT's "all-linear" for this architecture)
QWEN3_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class AdapterError(ValueError):
    """An adapter folder that cannot be read, or does not fit the model it is applied to."""


def is_adapter_folder(folder: str | Path) -> bool:
    return (Path(folder) / ADAPTER_CONFIG).is_file()


def read_adapter_config(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / ADAPTER_CONFIG
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        raise AdapterError(f"{folder} is not a LoRA adapter folder (no {ADAPTER_CONFIG})") from None
    except ValueError as e:
        raise AdapterError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(config, dict) or str(config.get("peft_type", "")).upper() != "LORA":
        raise AdapterError(f"{path} does not describe a LoRA adapter (peft_type must be LORA)")
    unsupported = [k for k in ("use_dora", "fan_in_fan_out") if config.get(k)]
    unsupported += [k for k in ("rank_pattern", "alpha_pattern", "modules_to_save") if config.get(k)]
    if str(config.get("bias", "none")) != "none":
        unsupported.append("bias")
    if unsupported:
        raise AdapterError(f"{path}: LoRA options {unsupported} are not supported")
    if not isinstance(config.get("r"), int) or config["r"] < 1:
        raise AdapterError(f"{path}: `r` must be a positive integer")
    return config


def adapter_scale(config: dict[str, Any]) -> float:
    r = config["r"]
    alpha = float(config.get("lora_alpha", r))
    return alpha / r ** 0.5 if config.get("use_rslora") else alpha / r


def save_adapter(folder: str | Path, weights: dict[str, tuple[torch.Tensor, torch.Tensor]], *, rank: int,
                 alpha: float, base: str, extra: dict[str, Any] | None = None) -> Path:
    """Write a PEFT adapter: `weights` maps a module name of the base (`model.layers.0.self_attn.q_proj`)
    to its (A, B) pair. Written to a temporary folder, then renamed."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tensors = {}
    for module, (a, b) in weights.items():
        tensors[f"{PREFIX}{module}.lora_A.weight"] = a.detach().float().contiguous()
        tensors[f"{PREFIX}{module}.lora_B.weight"] = b.detach().float().contiguous()
    save_file(tensors, str(tmp / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    targets = sorted({m.rsplit(".", 1)[-1] for m in weights})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base, "r": rank,
              "lora_alpha": alpha, "lora_dropout": 0.0, "target_modules": targets, "bias": "none",
              "fan_in_fan_out": False, "use_rslora": False, "use_dora": False, "modules_to_save": None,
              "inference_mode": True, "init_lora_weights": True, "rank_pattern": {}, "alpha_pattern": {},
              **(extra or {})}
    (tmp / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2))
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder


def read_adapter(folder: str | Path) -> tuple[dict[str, Any], dict[str, tuple[torch.Tensor, torch.Tensor]]]:
    """An adapter's config and its (A, B) pairs by module name of the base model."""
    config = read_adapter_config(folder)
    path = Path(folder) / ADAPTER_WEIGHTS
    if not path.is_file():
        raise AdapterError(f"{folder} has no {ADAPTER_WEIGHTS}")
    try:
        tensors = load_file(str(path))
    except Exception as e:  # noqa: BLE001 - safetensors raises several kinds on a corrupt file
        raise AdapterError(f"{path} cannot be read: {e}") from None
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, t in tensors.items():
        if not key.startswith(PREFIX) or not key.endswith((".lora_A.weight", ".lora_B.weight")):
            raise AdapterError(f"{path}: unexpected tensor {key!r} (only lora_A/lora_B weights are supported)")
        module, which = key[len(PREFIX):].rsplit(".", 2)[0], key.rsplit(".", 2)[1]
        pairs.setdefault(module, {})[which] = t
    out = {}
    for module, ab in pairs.items():
        if set(ab) != {"lora_A", "lora_B"}:
            raise AdapterError(f"{path}: {module} lacks {'lora_B' if 'lora_A' in ab else 'lora_A'}")
        out[module] = (ab["lora_A"], ab["lora_B"])
    return config, out


@torch.no_grad()
def apply_adapter(model: torch.nn.Module, folder: str | Path) -> int:
    """Merge the adapter in `folder` into `model`'s weights in place; returns how many layers changed.
    Every module must exist in the model with matching shapes, else nothing is changed."""
    config, weights = read_adapter(folder)
    scale = adapter_scale(config)
    modules = dict(model.named_modules())
    deltas = []
    for name, (a, b) in weights.items():
        layer = modules.get(name)
        if not isinstance(layer, torch.nn.Linear):
            raise AdapterError(f"the adapter changes {name!r}, which is not a linear layer of this model")
        out_f, in_f = layer.weight.shape
        if a.shape != (config["r"], in_f) or b.shape != (out_f, config["r"]):
            raise AdapterError(f"{name}: adapter shapes A{tuple(a.shape)} B{tuple(b.shape)} do not fit the "
                               f"layer ({out_f} x {in_f}) at rank {config['r']}")
        deltas.append((layer, (b.float() @ a.float()) * scale))
    for layer, delta in deltas:
        layer.weight += delta.to(layer.weight.dtype)
    return len(deltas)


def _target_layers(model: torch.nn.Module, targets: tuple[str, ...]) -> dict[str, torch.nn.Linear]:
    return {name: m for name, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets and ".layers." in f".{name}"}


@torch.no_grad()
def extract_adapter(base: torch.nn.Module, tuned: torch.nn.Module, folder: str | Path, *, rank: int,
                    base_path: str, targets: tuple[str, ...] = QWEN3_TARGETS,
                    extra: dict[str, Any] | None = None) -> Path:
    """The rank-`rank` adapter closest (Frobenius norm, per layer) to `tuned - base`."""
    tuned_layers = _target_layers(tuned, targets)
    weights = {}
    for name, layer in _target_layers(base, targets).items():
        other = tuned_layers.get(name)
        if other is None or other.weight.shape != layer.weight.shape:
            raise AdapterError(f"the tuned model has no layer {name} shaped like the base's")
        delta = (other.weight.float() - layer.weight.float())
        u, s, vh = torch.linalg.svd(delta, full_matrices=False)
        r = min(rank, s.numel())
        a = torch.zeros(rank, delta.shape[1])
        b = torch.zeros(delta.shape[0], rank)
        a[:r] = vh[:r]
        b[:, :r] = u[:, :r] * s[:r]
        weights[name] = (a, b)
    if not weights:
        raise AdapterError(f"the base model has none of the layers {list(targets)}")
    return save_adapter(folder, weights, rank=rank, alpha=float(rank), base=base_path, extra=extra)


@torch.no_grad()
def random_adapter(model: torch.nn.Module, folder: str | Path, *, rank: int = 8, seed: int = 0,
                   strength: float = 0.5, base_path: str, targets: tuple[str, ...] = QWEN3_TARGETS,
                   extra: dict[str, Any] | None = None) -> Path:
    """A random adapter whose update to each layer has `strength` times the norm of the layer's
    weight (enough to change what a tiny model says, so serving tests can tell it from the base)."""
    gen = torch.Generator().manual_seed(seed)
    weights = {}
    for name, layer in _target_layers(model, targets).items():
        out_f, in_f = layer.weight.shape
        a = torch.randn(rank, in_f, generator=gen)
        b = torch.randn(out_f, rank, generator=gen)
        norm = float(torch.linalg.matrix_norm(b @ a))
        b *= strength * float(torch.linalg.matrix_norm(layer.weight.float())) / max(norm, 1e-12)
        weights[name] = (a, b)
    if not weights:
        raise AdapterError(f"the model has none of the layers {list(targets)}")
    return save_adapter(folder, weights, rank=rank, alpha=float(rank), base=base_path, extra=extra)
