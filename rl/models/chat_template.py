"""The Jinja chat template of our tiny checkpoints: the same text `rl/chat/format.py` renders (Qwen3
non-thinking turns, tools listed in the system turn, hermes `<tool_call>` blocks, tool results in one
user turn). `save_model_folder` writes it into `tokenizer_config.json`, so that any engine that renders
prompts from the checkpoint's own template (vLLM's OpenAI server) prompts the model as it was trained.

The template is a file of the serving side (backend/serving/chat_templates/qwen3_hermes.jinja), so
that `muarl serving vllm-command` can hand it to vLLM for a checkpoint saved without one; a test
checks it renders exactly what `render_conversation` does.
"""

from __future__ import annotations

from pathlib import Path

import backend.serving

CHAT_TEMPLATE_FILE = Path(backend.serving.__file__).parent / "chat_templates" / "qwen3_hermes.jinja"
CHAT_TEMPLATE = CHAT_TEMPLATE_FILE.read_text()
