"""rl/tasks package."""
