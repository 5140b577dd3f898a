"""rl/simulator package."""
