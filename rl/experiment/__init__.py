"""The miniature paper experiment (cold start, GRPO with simulated customers, ablations, evaluation)."""
