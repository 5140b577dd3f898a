"""Who may read `/metrics`, over real HTTP: by default only loopback clients (a client reaching
the service through another interface gets 403); `MUARL_METRICS_ACCESS=open` serves everyone,
`token` asks for `Bearer $MUARL_METRICS_TOKEN`."""

from __future__ import annotations

import socket

import httpx
import pytest

from tests.backend.api.serving import ApiServer, make_settings


def _outside_address() -> str:
    """This machine's address on a non-loopback interface (connecting a UDP socket sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            pytest.skip("no non-loopback network interface to reach the service through")
        address = s.getsockname()[0]
    if address.startswith("127."):
        pytest.skip("no non-loopback network interface to reach the service through")
    return address


@pytest.fixture
async def serve(tau_db: str):
    servers: list[ApiServer] = []

    async def start(**overrides) -> ApiServer:
        server = ApiServer(make_settings(tau_db, None, **overrides), host="0.0.0.0")
        servers.append(await server.start())
        return server

    yield start
    for server in servers:
        await server.stop()


async def _get(url: str, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as c:
        return await c.get(url, headers=headers)


async def test_metrics_default_to_loopback_only(serve) -> None:
    outside = _outside_address()
    server = await serve()
    inside = await _get(f"http://127.0.0.1:{server.port}/metrics")
    assert inside.status_code == 200 and "muarl_http_requests_total" in inside.text
    refused = await _get(f"http://{outside}:{server.port}/metrics")
    assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json"
    assert "MUARL_METRICS_ACCESS" in refused.json()["detail"]
    assert (await _get(f"http://{outside}:{server.port}/healthz")).status_code == 200  # the rest is served


async def test_metrics_open_or_behind_a_token(serve) -> None:
    outside = _outside_address()
    opened = await serve(MUARL_METRICS_ACCESS="open")
    assert (await _get(f"http://{outside}:{opened.port}/metrics")).status_code == 200
    guarded = await serve(MUARL_METRICS_ACCESS="token", MUARL_METRICS_TOKEN="metrics-secret")
    for url in (f"http://127.0.0.1:{guarded.port}/metrics", f"http://{outside}:{guarded.port}/metrics"):
        assert (await _get(url)).status_code == 401
        assert (await _get(url, Authorization="Bearer wrong")).status_code == 401
        assert (await _get(url, Authorization="Bearer metrics-secret")).status_code == 200
