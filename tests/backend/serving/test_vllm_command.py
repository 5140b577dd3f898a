"""`muarl serving vllm-command --version ID`, run as the real command on a real database: the launch
command for a full version and for an adapter (served on its base, loaded under its versioned name),
hermes tool calls, LoRA flags sized to the adapter, our chat template only when the folder has none,
the CPU profile's flags; an unknown version exits 1. (tests/rl/serving/test_vllm_engine.py launches
vLLM with such a command.)"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from backend.serving.registry import ModelRegistry
from backend.serving.vllm_command import CHAT_TEMPLATE, vllm_command
from tests.backend.serving.conftest import write_model_folder
from tests.backend.test_models_cli import muarl


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


async def test_vllm_command_for_full_and_adapter_versions(empty_db: str, registry: ModelRegistry,
                                                          tmp_path: Path) -> None:
    base_dir = write_model_folder(tmp_path / "base")
    (base_dir / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    base = await registry.register_folder(base_dir, actor="t", engine="vllm", served_name="tiny-v1")
    lora_dir = write_model_folder(tmp_path / "lora", adapter=True)
    (lora_dir / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 24}))
    lora = await registry.register_folder(lora_dir, actor="t", engine="vllm", base=base.id, parent=base.id)
    bare = await registry.register_folder(write_model_folder(tmp_path / "bare"), actor="t")  # local engine

    r = muarl(empty_db, "http://127.0.0.1:9/v1", "serving", "vllm-command", "--version", base.id)
    assert r.returncode == 0, r.stderr
    env_and_argv = shlex.split(r.stdout)
    assert env_and_argv[0] == "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
    argv = env_and_argv[1:]
    assert argv[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    assert _flag(argv, "--model") == base.artifact_uri and _flag(argv, "--served-model-name") == "tiny-v1"
    assert "--enable-auto-tool-choice" in argv and _flag(argv, "--tool-call-parser") == "hermes"
    assert "--enable-lora" in argv and _flag(argv, "--max-lora-rank") == "8"
    assert "--chat-template" not in argv and "--lora-modules" not in argv and "--dtype" not in argv

    r = muarl(empty_db, "http://127.0.0.1:9/v1", "serving", "vllm-command", "--version", lora.id,
              "--device-profile", "cpu", "--python", ".venv-vllm/bin/python", "--port", "8123", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    argv, env = out["argv"], out["env"]
    assert argv[0] == ".venv-vllm/bin/python" and _flag(argv, "--port") == "8123"
    assert _flag(argv, "--model") == base.artifact_uri and _flag(argv, "--served-model-name") == "tiny-v1"
    assert json.loads(_flag(argv, "--lora-modules")) == {"name": lora.served_name, "path": lora.artifact_uri,
                                                         "base_model_name": "tiny-v1"}
    assert _flag(argv, "--max-lora-rank") == "32"  # the smallest vLLM rank that holds r=24
    assert _flag(argv, "--dtype") == "float32" and _flag(argv, "--gpu-memory-utilization") == "0.15"
    assert env == {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert "only the local engine" in r.stderr  # the fixture's manifest has a view vLLM does not apply

    command = vllm_command(bare, profile="cpu")
    assert _flag(command.argv, "--chat-template") == str(CHAT_TEMPLATE) and CHAT_TEMPLATE.is_file()
    assert any("local engine" in n for n in command.notes)

    r = muarl(empty_db, "http://127.0.0.1:9/v1", "serving", "vllm-command", "--version", "v404")
    assert r.returncode == 1 and "v404" in r.stderr and r.stdout == ""
    r = muarl(empty_db, "http://127.0.0.1:9/v1", "serving", "vllm-command", "--version", base.id,
              "--device-profile", "tpu")
    assert r.returncode == 1 and "tpu" in r.stderr
