"""think: returns an empty string and changes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("thought", ["The order is pending, so it can be cancelled.", "", "ünïcödé ✓"])
async def test_think_returns_nothing_and_writes_nothing(
    store_conn: AsyncConnection, compat: bool, thought: str
) -> None:
    desk = Desk(store_conn, compat=compat)
    before = await desk.fingerprint()
    res = await desk.result("think", thought=thought)
    assert (res.output, res.ok, res.terminal) == ("", True, False)
    assert await desk.fingerprint() == before


@pytest.mark.parametrize("compat", [True, False])
async def test_think_needs_its_argument(store_conn: AsyncConnection, compat: bool) -> None:
    out = await Desk(store_conn, compat=compat).refuses(None, "think")
    if compat:
        assert out == "Error: Think.invoke() missing 1 required positional argument: 'thought'"
