"""Serving checkpoints trained here: the local OpenAI-compatible engine (`muarl model-server`) and
LoRA adapters in PEFT format (made, read and applied without `peft`)."""
