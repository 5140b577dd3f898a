"""The ops-token guard that ops endpoints (added by later work) depend on: disabled without
MUARL_OPS_TOKEN, 401 without a bearer token, 403 with a wrong one; it names the actor."""

from __future__ import annotations

import httpx
import pytest

from backend.api.app import create_app
from backend.api.deps import OpsAccess
from tests.backend.api.serving import make_settings


@pytest.mark.parametrize("configured", [True, False])
async def test_ops_token_guard(configured: bool) -> None:
    settings = make_settings("postgresql+asyncpg://unused@127.0.0.1:1/unused", None,
                             MUARL_OPS_TOKEN="ops-secret" if configured else None)
    app = create_app(settings, db_url="postgresql+asyncpg://unused@127.0.0.1:1/unused")

    @app.get("/v1/ops/ping")
    async def ping(actor: OpsAccess) -> dict[str, str]:
        return {"pong": actor}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        right = await client.get("/v1/ops/ping", headers={"Authorization": "Bearer ops-secret"})
        named = await client.get("/v1/ops/ping", headers={"Authorization": "Bearer ops-secret", "X-Ops-Actor": "ann"})
        wrong = await client.get("/v1/ops/ping", headers={"Authorization": "Bearer nope"})
        missing = await client.get("/v1/ops/ping")
    if configured:
        assert right.status_code == 200 and right.json() == {"pong": "ops"}
        assert named.json() == {"pong": "ops:ann"}
        assert wrong.status_code == 403 and missing.status_code == 401
        assert wrong.headers["content-type"] == "application/problem+json"
    else:
        assert {right.status_code, wrong.status_code, missing.status_code} == {503}
        assert "MUARL_OPS_TOKEN" in right.json()["detail"]
