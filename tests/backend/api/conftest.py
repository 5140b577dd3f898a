"""The API tests' fixtures live in `serving.py` (the MCP tests use them too)."""

from tests.backend.api.serving import api, client, fake_llm, script, settings_overrides  # noqa: F401
