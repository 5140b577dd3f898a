"""backend/api/routes package."""
