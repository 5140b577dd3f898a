"""A tiny Qwen3 checkpoint trained here for serving tests: it has learned one short tool-using
conversation by heart (a `get_order_details` call for the order the customer names, then a fixed
answer once the tool result is in), so that a served reply can be checked word for word, and a random
LoRA adapter for it whose replies differ. Built once per test session (a few seconds of training)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from rl.chat.format import render_conversation
from rl.coldstart.sft import SFTConfig, sft_train
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model, save_model_folder
from rl.models.tokenizer import train_bpe
from rl.serving.lora import random_adapter

TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {
    "name": "get_order_details", "description": "Get an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}]
SYSTEM = {"role": "system", "content": "You are a store agent."}
ASK = {"role": "user", "content": "Where is order #W1003?"}
CALL_ARGS = {"order_id": "#W1003"}
RESULT = '{"status": "delivered"}'
ANSWER = "It was delivered."
RECIPE = TinyQwen3Recipe(hidden_size=128, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=64, intermediate_size=256, max_position_embeddings=8192)


def conversation(call_id: str = "call_0") -> list[dict[str, Any]]:
    """The learned conversation, complete."""
    return [SYSTEM, ASK,
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "get_order_details", "arguments": json.dumps(CALL_ARGS)}}]},
            {"role": "tool", "tool_call_id": call_id, "content": RESULT},
            {"role": "assistant", "content": ANSWER}]


def chat_service_prompt() -> str:
    """The chat service's system prompt and tool list as the model reads them (tokenizer corpus: the
    service's prompts stay a couple of thousand tokens long instead of over 8k)."""
    import backend.tools.retail  # noqa: F401 - registers the retail tools
    from backend.agent.policy import system_prompt
    from backend.tools.registry import RETAIL

    return render_conversation([{"role": "system", "content": system_prompt()}, ASK], RETAIL.openai_schemas())


def build_checkpoints(root: Path, steps: int = 30, view: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """(base model folder, adapter folder) under `root`; `view`: the manifest's view (rl/chat/views.py)."""
    torch.manual_seed(0)
    record = {"messages": conversation(), "tools": TOOLS}
    tok = train_bpe([render_conversation(record["messages"], TOOLS), chat_service_prompt()] * 4, vocab_size=1500)
    model = build_tiny_model(tok, RECIPE)
    sft_train(model, tok, [record], SFTConfig(epochs=steps, batch_size=1, lr=6e-3, micro_batch_tokens=4096))
    model.eval()
    model.generation_config.max_new_tokens = 64  # engines' default reply budget (vLLM reads it)
    manifest = {"recipe": RECIPE.model_dump(), "kind": "tiny", **({"view": view} if view else {})}
    base = save_model_folder(model, tok, root / "base", manifest)
    adapter = random_adapter(model, root / "adapter", rank=8, seed=2, strength=4.0, base_path=str(base))
    return base, adapter
