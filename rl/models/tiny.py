"""The tiny Qwen3 recipe: a randomly initialised `transformers` `Qwen3ForCausalLM` small enough to
train on two CPU cores (hidden 256, 4 layers, ~4M parameters with a 4k BPE vocabulary), saved as a
normal Hugging Face model folder (safetensors, config.json, tokenizer files with our chat template,
rl/models/chat_template.py) plus `manifest.json`
recording how it was made (recipe, parameter count, tokenizer corpus digest, parent, training).

`load_model_folder` reads any such folder, including real Qwen3 checkpoints (which have no manifest).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel
from transformers import PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM

from rl.models.chat_template import CHAT_TEMPLATE
from rl.models.tokenizer import load_tokenizer

MANIFEST = "manifest.json"


class TinyQwen3Recipe(BaseModel):
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 64
    intermediate_size: int = 704
    max_position_embeddings: int = 8192
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True
    seed: int = 0


def build_tiny_model(tokenizer: PreTrainedTokenizerBase, recipe: TinyQwen3Recipe | None = None) -> Qwen3ForCausalLM:
    recipe = recipe or TinyQwen3Recipe()
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden_size,
        num_hidden_layers=recipe.num_hidden_layers,
        num_attention_heads=recipe.num_attention_heads,
        num_key_value_heads=recipe.num_key_value_heads,
        head_dim=recipe.head_dim,
        intermediate_size=recipe.intermediate_size,
        max_position_embeddings=recipe.max_position_embeddings,
        rope_theta=recipe.rope_theta,
        tie_word_embeddings=recipe.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(recipe.seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def save_model_folder(model: Qwen3ForCausalLM, tokenizer: PreTrainedTokenizerBase, folder: str | Path,
                      manifest: dict[str, Any]) -> Path:
    """Write model + tokenizer + manifest; writes to a temporary folder first, then renames."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        _rmtree(tmp)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, safe_serialization=True)
    if not tokenizer.chat_template:  # engines that render prompts themselves (vLLM) need our chat format
        tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(tmp, save_jinja_files=False)  # the template inside tokenizer_config.json
    full = {"created": dt.datetime.now(dt.UTC).isoformat(), "parameters": n_parameters(model),
            "architecture": type(model).__name__, **manifest}
    (tmp / MANIFEST).write_text(json.dumps(full, indent=2, default=str))
    if folder.exists():
        _rmtree(folder)
    tmp.rename(folder)
    return folder


def load_model_folder(folder: str | Path, dtype: torch.dtype = torch.float32) -> tuple[
        Qwen3ForCausalLM, PreTrainedTokenizerBase, dict[str, Any]]:
    from transformers import AutoModelForCausalLM

    folder = Path(folder)
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
    tok = load_tokenizer(folder)
    manifest_path = folder / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    return model, tok, manifest


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path)
