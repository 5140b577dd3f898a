"""The API fixtures (real app under uvicorn, fake model server) for the browser tests, and an
embedded Redis broker for starting cycles."""

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.broker import start_embedded_redis, stop_embedded_redis
from tests.backend.api.serving import api, client, fake_llm, script, settings_overrides  # noqa: F401


@pytest.fixture
def broker_socket() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="web", dir="/tmp") as d:
        yield start_embedded_redis(Path(d))
        stop_embedded_redis(Path(d))
