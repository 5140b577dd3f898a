"""Models that train in-process: tokenizers (Hugging Face or our own small BPE) and the tiny Qwen3 recipe."""
