"""transfer_to_human_agents: `Transfer successful`, a terminal tool that changes nothing."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.tools.context import Principal
from backend.tools.registry import RETAIL
from tests.backend.tools.retail_harness import Desk


@pytest.mark.parametrize("compat", [True, False])
async def test_transfer(store_conn: AsyncConnection, compat: bool) -> None:
    desk = Desk(store_conn, compat=compat)
    before = await desk.fingerprint()
    res = await desk.result("transfer_to_human_agents", summary="Customer wants a refund to a closed card.")
    assert (res.output, res.ok, res.terminal) == ("Transfer successful", True, True)
    assert await desk.fingerprint() == before
    assert "transfer_to_human_agents" in RETAIL.terminal_names()


async def test_an_unauthenticated_customer_can_be_transferred(store_conn: AsyncConnection) -> None:
    desk = Desk(store_conn, principal=Principal.customer())
    assert await desk.text("transfer_to_human_agents", summary="") == "Transfer successful"


@pytest.mark.parametrize("compat", [True, False])
async def test_summary_is_required(store_conn: AsyncConnection, compat: bool) -> None:
    out = await Desk(store_conn, compat=compat).refuses(None, "transfer_to_human_agents")
    if compat:
        assert out == "Error: TransferToHumanAgents.invoke() missing 1 required positional argument: 'summary'"
