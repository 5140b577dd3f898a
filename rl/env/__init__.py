"""rl/env package."""
