"""PEFT-format LoRA adapters without `peft`: the files vLLM reads (adapter_config.json, safetensors
keys `base_model.model.<module>.lora_A.weight`), extraction of what training changed (exact when the
change has the adapter's rank), merging into a base, and refusals that change nothing."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from safetensors.torch import load_file

from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import train_bpe
from rl.serving.lora import (
    AdapterError,
    apply_adapter,
    extract_adapter,
    random_adapter,
    read_adapter,
    read_adapter_config,
)

RECIPE = TinyQwen3Recipe(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=32, intermediate_size=96)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    tok = train_bpe(["hello there, general store"] * 3, vocab_size=300)
    return build_tiny_model(tok, RECIPE).eval()


def _weights(m: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def test_extract_recovers_a_low_rank_change_exactly_and_apply_merges_it(model, tmp_path) -> None:
    tuned = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():  # what a LoRA fine-tune of rank 4 does to two layers
        for layer in (tuned.model.layers[0].self_attn.q_proj, tuned.model.layers[1].mlp.down_proj):
            out_f, in_f = layer.weight.shape
            layer.weight += torch.randn(out_f, 4, generator=gen) @ torch.randn(4, in_f, generator=gen) * 0.05
    folder = extract_adapter(model, tuned, tmp_path / "adapter", rank=8, base_path="/models/base")
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 8 and config["base_model_name_or_path"] == "/models/base"
    assert set(config["target_modules"]) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                             "down_proj"}
    tensors = load_file(str(folder / "adapter_model.safetensors"))
    a = tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
    b = tensors["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]
    assert a.shape == (8, 64) and b.shape == (64, 8)
    assert len(tensors) == 2 * 7 * RECIPE.num_hidden_layers

    merged = copy.deepcopy(model)
    assert apply_adapter(merged, folder) == 7 * RECIPE.num_hidden_layers
    for name, w in _weights(tuned).items():
        assert torch.allclose(merged.state_dict()[name], w, atol=1e-5), name


def test_a_random_adapter_changes_the_model(model, tmp_path) -> None:
    folder = random_adapter(model, tmp_path / "random", rank=8, seed=1, base_path="base")
    merged = copy.deepcopy(model)
    apply_adapter(merged, folder)
    ids = torch.tensor([[3, 4, 5, 6]])
    with torch.no_grad():
        assert not torch.allclose(model(ids).logits, merged(ids).logits)
    config, pairs = read_adapter(folder)
    assert config["lora_alpha"] == 8 and len(pairs) == 14


def test_refusals_leave_the_model_unchanged(model, tmp_path) -> None:
    folder = random_adapter(model, tmp_path / "a", rank=8, base_path="base")
    other = build_tiny_model(train_bpe(["x y z"] * 3, vocab_size=300), RECIPE.model_copy(update={"hidden_size": 32,
                                                                                               "head_dim": 16}))
    before = _weights(other)
    with pytest.raises(AdapterError, match="do not fit"):
        apply_adapter(other, folder)
    assert all(torch.equal(other.state_dict()[k], v) for k, v in before.items())
    config = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(AdapterError, match="use_dora"):
        read_adapter_config(folder)
    (folder / "adapter_config.json").write_text(json.dumps({**config, "peft_type": "IA3"}))
    with pytest.raises(AdapterError, match="LORA"):
        read_adapter_config(folder)
    with pytest.raises(AdapterError, match="no adapter_config.json"):
        read_adapter_config(tmp_path)
