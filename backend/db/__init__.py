"""backend/db package."""
