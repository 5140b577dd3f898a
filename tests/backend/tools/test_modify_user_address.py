"""modify_user_address: replaces a customer's default address and returns the user."""

from __future__ import annotations

import copy

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk, same_json

NEW_ADDRESS = {"address1": "400 Summit Avenue", "address2": "", "city": "Tulsa", "state": "OK",
               "country": "USA", "zip": "74103"}


@pytest.mark.parametrize("compat", [True, False])
async def test_changes_the_default_address(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    user_id, user = list(tau_retail["users"].items())[11]
    before = await desk.export()
    out = await desk.json("modify_user_address", user_id=user_id, **NEW_ADDRESS)
    expected = copy.deepcopy(user)
    expected["address"] = dict(NEW_ADDRESS)
    assert same_json(out, expected)
    after = await desk.export()
    assert same_json(after["users"][user_id], expected)
    assert same_json(after["orders"], before["orders"])  # orders keep the address they were placed with
    if compat:
        assert list(out["address"]) == ["address1", "address2", "city", "state", "country", "zip"]


@pytest.mark.parametrize("compat", [True, False])
async def test_new_zip_finds_the_customer(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    user_id, user = list(tau_retail["users"].items())[11]
    await desk.json("modify_user_address", user_id=user_id, **NEW_ADDRESS)
    name = user["name"]
    assert await desk.text("find_user_id_by_name_zip", first_name=name["first_name"], last_name=name["last_name"],
                           zip=NEW_ADDRESS["zip"]) == user_id
    await desk.refuses("Error: user not found", "find_user_id_by_name_zip", first_name=name["first_name"],
                       last_name=name["last_name"], zip=user["address"]["zip"])


@pytest.mark.parametrize("compat", [True, False])
async def test_unknown_user(store_conn: AsyncConnection, compat: bool) -> None:
    await Desk(store_conn, compat=compat).refuses("Error: user not found", "modify_user_address",
                                                  user_id="nobody_0000", **NEW_ADDRESS)


@pytest.mark.parametrize("compat", [True, False])
async def test_extra_argument(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    user_id = next(iter(tau_retail["users"]))
    out = await Desk(store_conn, compat=compat).refuses(None, "modify_user_address", user_id=user_id,
                                                        **NEW_ADDRESS, province="ON")
    if compat:
        assert out == "Error: ModifyUserAddress.invoke() got an unexpected keyword argument 'province'"
