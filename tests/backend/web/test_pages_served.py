"""The pages and their assets come from the API itself (no CDN): `/` and `/ops` are HTML with a
same-origin content policy, every script and stylesheet they name is served, and the training
curves endpoint needs the ops token and answers empty before any cycle."""

from __future__ import annotations

import re

import httpx

OPS = {"Authorization": "Bearer ops-test-token"}


async def test_pages_and_assets_are_served_by_the_api(client: httpx.AsyncClient) -> None:
    for path in ("/", "/ops"):
        r = await client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert "default-src 'self'" in r.headers["content-security-policy"]
        assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', r.text)
        assert assets and not re.search(r'(?:src|href)="https?://', r.text)
        for asset in assets:
            a = await client.get(asset)
            assert a.status_code == 200 and len(a.content) > 100, asset
    assert (await client.get("/static/nope.js")).status_code == 404


async def test_training_curves_need_the_ops_token(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/ops/curves")).status_code == 401
    assert (await client.get("/v1/ops/curves", headers={"Authorization": "Bearer nope"})).status_code == 403
    r = await client.get("/v1/ops/curves", headers=OPS)
    assert r.status_code == 200 and r.json() == {"cycles": [], "steps": []}
