"""`muarl verl import-checkpoint`: a real FSDP checkpoint (two CPU ranks sharding a tiny Qwen3,
tests/rl/verl/fsdp_checkpoint.py) goes through verl's own model merger into a Hugging Face folder
with the same weights, gets our manifest and becomes a registry version with its lineage."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from backend.db.engine import make_engine
from backend.serving.registry import ModelRegistry
from rl.models.tiny import build_tiny_model, save_model_folder
from rl.models.tokenizer import train_bpe

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[Path, Path]:
    """(the original model folder, a verl checkpoint step folder trained from it)."""
    d = tmp_path_factory.mktemp("verl_ckpt")
    tok = train_bpe(["find the order, cancel it, hello"] * 20, vocab_size=300)
    model_dir = d / "tiny"
    save_model_folder(build_tiny_model(tok), tok, model_dir, {"name": "tiny"})
    step = d / "checkpoints" / "muarl" / "qwen3-8b" / "global_step_20"
    (step / "actor").mkdir(parents=True)
    r = subprocess.run([sys.executable, "-m", "tests.rl.verl.fsdp_checkpoint", str(model_dir), str(step / "actor"),
                        str(_free_port())], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert (step / "actor" / "model_world_size_2_rank_1.pt").is_file()
    return model_dir, step


@pytest.fixture
async def registry(empty_db: str) -> AsyncIterator[ModelRegistry]:
    engine = make_engine(empty_db, null_pool=True)
    yield ModelRegistry(engine)
    await engine.dispose()


async def test_import_checkpoint_merges_and_registers(checkpoint, registry: ModelRegistry, tmp_path: Path) -> None:
    from rl.verl.checkpoint import import_checkpoint

    model_dir, step = checkpoint
    out = tmp_path / "merged"
    v = await import_checkpoint(step, out, registry, name="qwen3-8b-grpo", actor="test", recipe="qwen3-8b",
                                parent=None, engine="vllm")
    # verl's merger wrote a Hugging Face folder with the trained weights (bf16)
    before, after = load_file(model_dir / "model.safetensors"), load_file(out / "model.safetensors")
    assert set(before) == set(after)
    assert all(torch.equal(before[k].to(after[k].dtype), after[k]) for k in before)
    assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
    # registered as a version with its lineage and recipe
    assert v.kind == "full" and v.engine == "vllm" and v.artifact_uri == str(out.resolve())
    assert v.recipe == {"name": "qwen3-8b", "trainer": "verl-0.9.1-grpo"}
    assert v.training_metrics == {"checkpoint": str(step.resolve()), "global_step": 20}
    assert "manifest.json" in v.files and "model.safetensors" in v.files
    assert json.loads((out / "manifest.json").read_text())["name"] == "qwen3-8b-grpo"
    assert [e.kind for e in await registry.events()] == ["register"]


def test_cli_refuses_what_is_not_a_checkpoint(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "backend.cli", "verl", "import-checkpoint", str(tmp_path),
                        "--out", str(tmp_path / "o")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "not a verl FSDP checkpoint" in r.stderr
    assert not (tmp_path / "o").exists()
