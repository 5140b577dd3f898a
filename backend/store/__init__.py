"""backend/store package."""
