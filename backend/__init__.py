"""muarl server side: store, tools, agent, API and serving. Never imports rl/."""
