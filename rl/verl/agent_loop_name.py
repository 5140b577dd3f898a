"""The name our agent loop is registered under in verl and its import path (no verl import here, so
`muarl verl prepare` runs without verl installed)."""

AGENT_NAME = "muarl_agent"
LOOP_TARGET = "rl.verl.agent_loop.MuarlAgentLoop"
