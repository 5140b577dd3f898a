"""rl/eval package."""
