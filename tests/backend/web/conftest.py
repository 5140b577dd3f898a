"""The API fixtures (real app under uvicorn, fake model server) for the browser tests."""

from tests.backend.api.serving import api, client, fake_llm, script, settings_overrides  # noqa: F401
