"""rl/policies package."""
