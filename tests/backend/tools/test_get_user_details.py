"""get_user_details: the user record as JSON, `Error: user not found` otherwise."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk, is_ascii, same_json


@pytest.mark.parametrize("compat", [True, False])
async def test_returns_the_record(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    for user_id in list(tau_retail["users"])[::50]:
        out = await desk.text("get_user_details", user_id=user_id)
        assert is_ascii(out)
        assert same_json(json.loads(out), tau_retail["users"][user_id])


async def test_gift_card_balances_and_card_details_are_shown(store_conn: AsyncConnection, tau_retail: dict) -> None:
    desk = Desk(store_conn, compat=True)
    user_id = next(uid for uid, u in tau_retail["users"].items()
                   if {pm["source"] for pm in u["payment_methods"].values()} >= {"gift_card", "credit_card"})
    shown = await desk.json("get_user_details", user_id=user_id)
    for pm_id, pm in tau_retail["users"][user_id]["payment_methods"].items():
        assert same_json(shown["payment_methods"][pm_id], pm)


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("user_id", ["nobody_1234", "", "NOAH_BROWN_6181", "#W5918442"])
async def test_unknown_user(store_conn: AsyncConnection, compat: bool, user_id: str) -> None:
    await Desk(store_conn, compat=compat).refuses("Error: user not found", "get_user_details", user_id=user_id)
