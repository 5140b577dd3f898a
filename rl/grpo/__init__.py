"""rl/grpo package."""
