"""rl/verl package."""
