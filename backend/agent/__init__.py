"""backend/agent package."""
