"""rl/coldstart package."""
