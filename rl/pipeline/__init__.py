"""rl/pipeline package."""
