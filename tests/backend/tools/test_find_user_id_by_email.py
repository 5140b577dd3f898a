"""find_user_id_by_email: case-insensitive lookup, `Error: user not found` otherwise."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk


@pytest.mark.parametrize("compat", [True, False])
async def test_finds_every_spelling_of_an_email(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    user_id, user = list(tau_retail["users"].items())[7]
    assert await desk.text("find_user_id_by_email", email=user["email"]) == user_id
    assert await desk.text("find_user_id_by_email", email=user["email"].upper()) == user_id
    assert await desk.text("find_user_id_by_email", email=user["email"].title()) == user_id


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("email", ["nobody@example.com", "", " ", "noah.brown7922@example.com "])
async def test_unknown_email(store_conn: AsyncConnection, compat: bool, email: str) -> None:
    desk = Desk(store_conn, compat=compat)
    await desk.refuses("Error: user not found", "find_user_id_by_email", email=email)


async def test_every_user_is_found_by_their_email(store_conn: AsyncConnection, tau_retail: dict) -> None:
    desk = Desk(store_conn, compat=True)
    for user_id, user in list(tau_retail["users"].items())[::25]:
        assert await desk.text("find_user_id_by_email", email=user["email"]) == user_id
