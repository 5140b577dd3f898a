"""backend/api package."""
