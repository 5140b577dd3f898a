"""The chat template saved with tiny checkpoints renders exactly what our trace builder trains on, so an
engine that renders prompts from the checkpoint (vLLM) prompts the model as it was trained."""

import json

from rl.chat.format import render_conversation
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model, save_model_folder
from rl.models.tokenizer import load_tokenizer, train_bpe

TOOLS = [{"type": "function", "function": {"name": "get_order_details", "description": "Get an order (ünï).",
                                           "parameters": {"type": "object",
                                                          "properties": {"order_id": {"type": "string"}}}}}]
CONVERSATION = [
    {"role": "system", "content": "You are a store agent."},
    {"role": "user", "content": "Where is #W1003?"},
    {"role": "assistant", "content": " Let me look. ", "tool_calls": [
        {"id": "a", "type": "function",
         "function": {"name": "get_order_details", "arguments": json.dumps({"order_id": "#W1003"})}},
        {"id": "b", "type": "function", "function": {"name": "get_order_details", "arguments": {"order_id": "é"}}}]},
    {"role": "tool", "tool_call_id": "a", "content": '{"status": "delivered"}'},
    {"role": "tool", "tool_call_id": "b", "content": "no such order"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get_order_details", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c", "content": "x"},
    {"role": "assistant", "content": "It was delivered."},
    {"role": "user", "content": "Thanks!"},
]


def test_saved_template_renders_our_chat_format(tmp_path):
    tok = train_bpe([render_conversation(CONVERSATION, TOOLS)] * 3, vocab_size=300)
    folder = save_model_folder(build_tiny_model(tok, TinyQwen3Recipe(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        intermediate_size=64)), tok, tmp_path / "tiny", {})
    assert "chat_template" in json.loads((folder / "tokenizer_config.json").read_text())
    loaded = load_tokenizer(folder)
    for messages in (CONVERSATION, CONVERSATION[1:]):
        for tools in (TOOLS, None):
            rendered = loaded.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
            assert rendered == render_conversation(messages, tools, add_generation_prompt=True)
