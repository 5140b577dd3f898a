"""Throwaway databases for tests and benchmarks.

`TestDatabases` creates uniquely named databases on one server (`TEST_DATABASE_URL`,
else `DATABASE_URL`, else the embedded server under `var/test`), migrated and optionally
loaded with a store, and drops everything it created when closed. Names carry a random
prefix so that several test runs can share one server.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from backend.config import get_settings
from backend.db.engine import create_database, drop_database, normalize_url, with_database
from backend.db.migrate import upgrade_database


def test_server_url() -> str:
    settings = get_settings()
    url = os.environ.get("TEST_DATABASE_URL") or settings.test_database_url or settings.database_url
    if url:
        return normalize_url(url)
    from backend.db.embedded import start_embedded_postgres

    return start_embedded_postgres(Path(settings.var_dir) / "test")


class TestDatabases:
    """Creates and later drops databases named `t_<run>_<n>`."""

    __test__ = False  # not a pytest class

    def __init__(self, server_url: str | None = None) -> None:
        self.server_url = server_url or test_server_url()
        self.prefix = f"t_{uuid.uuid4().hex[:8]}"
        self._created: list[str] = []
        self._n = 0

    def _name(self, label: str) -> str:
        self._n += 1
        return f"{self.prefix}_{label}_{self._n}"[:63]

    async def create(self, label: str = "db", *, template: str | None = None, migrate: bool = True) -> str:
        """A new database (a copy of `template` if given, else migrated empty); returns its URL."""
        name = self._name(label)
        url = await create_database(self.server_url, name, template=template)
        self._created.append(name)
        if migrate and template is None:
            await upgrade_database(url)
        return url

    def url_of(self, name: str) -> str:
        return with_database(self.server_url, name)

    async def drop(self, name: str) -> None:
        await drop_database(self.server_url, name)
        if name in self._created:
            self._created.remove(name)

    async def close(self) -> None:
        for name in reversed(self._created):
            try:
                await drop_database(self.server_url, name)
            except Exception:
                pass
        self._created.clear()
