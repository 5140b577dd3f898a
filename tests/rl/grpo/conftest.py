"""Shared tiny tokenizer + model for GRPO tests (built once per session; seconds)."""

import pytest
import torch

from rl.chat.format import render_conversation
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import train_bpe

torch.set_num_threads(2)

MICRO = TinyQwen3Recipe(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                        head_dim=32, intermediate_size=128)


@pytest.fixture(scope="session")
def tiny_tok():
    texts = []
    for i in range(150):
        texts.append(render_conversation([
            {"role": "user", "content": f"Please look up order #W{1000 + i} for user anna_{i}."},
            {"role": "assistant", "content": "Sure.", "tool_calls": [
                {"function": {"name": "get_order_details", "arguments": {"order_id": f"#W{1000 + i}"}}}]},
            {"role": "tool", "content": '{"status": "pending", "items": []}'},
            {"role": "assistant", "content": "It is pending. Anything else?"}]))
    return train_bpe(texts, vocab_size=500)


@pytest.fixture
def tiny_model(tiny_tok):
    return build_tiny_model(tiny_tok, MICRO)


@pytest.fixture
def tiny_manifest():
    return {"recipe": MICRO.model_dump(), "kind": "tiny-test"}
