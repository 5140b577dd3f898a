"""Chat format for training and local inference: Qwen3 non-thinking turns with hermes tool calls."""
