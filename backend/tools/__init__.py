"""backend/tools package."""
