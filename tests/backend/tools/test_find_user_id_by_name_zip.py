"""find_user_id_by_name_zip: names case-insensitive, zip exact, `Error: user not found` otherwise."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.backend.tools.retail_harness import Desk


def _someone(tau_retail: dict) -> tuple[str, dict]:
    return list(tau_retail["users"].items())[3]


@pytest.mark.parametrize("compat", [True, False])
async def test_finds_by_name_and_zip(store_conn: AsyncConnection, tau_retail: dict, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    user_id, user = _someone(tau_retail)
    first, last, zip_code = user["name"]["first_name"], user["name"]["last_name"], user["address"]["zip"]
    assert await desk.text("find_user_id_by_name_zip", first_name=first, last_name=last, zip=zip_code) == user_id
    assert await desk.text("find_user_id_by_name_zip", first_name=first.upper(), last_name=last.lower(),
                           zip=zip_code) == user_id


@pytest.mark.parametrize("compat", [True, False])
@pytest.mark.parametrize("change", ["first", "last", "zip", "zip_padded", "empty"])
async def test_no_match(store_conn: AsyncConnection, tau_retail: dict, compat: bool, change: str) -> None:
    desk = Desk(store_conn, compat=compat)
    _, user = _someone(tau_retail)
    args = {"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"],
            "zip": user["address"]["zip"]}
    if change == "first":
        args["first_name"] += "x"
    elif change == "last":
        args["last_name"] = "Nobodyson"
    elif change == "zip":
        args["zip"] = str(int(args["zip"]) + 1).zfill(5) if args["zip"] != "99999" else "00000"
    elif change == "zip_padded":
        args["zip"] = " " + args["zip"]
    else:
        args = {"first_name": "", "last_name": "", "zip": ""}
    await desk.refuses("Error: user not found", "find_user_id_by_name_zip", **args)


async def test_zip_is_compared_exactly_not_by_case_of_names(store_conn: AsyncConnection, tau_retail: dict) -> None:
    """Every user is found by name and zip; the first matching user (in store order) wins."""
    desk = Desk(store_conn, compat=True)
    first_match: dict[tuple[str, str, str], str] = {}
    for uid, u in tau_retail["users"].items():
        key = (u["name"]["first_name"].lower(), u["name"]["last_name"].lower(), u["address"]["zip"])
        first_match.setdefault(key, uid)
    for (first, last, zip_code), uid in list(first_match.items())[::40]:
        assert await desk.text("find_user_id_by_name_zip", first_name=first, last_name=last, zip=zip_code) == uid
