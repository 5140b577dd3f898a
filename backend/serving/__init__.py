"""backend/serving package."""
