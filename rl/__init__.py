"""muarl learning side: tasks, sandboxes, simulators, policies, cold start, GRPO, evaluation."""
