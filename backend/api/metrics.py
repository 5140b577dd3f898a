"""Prometheus metrics of the API: requests and their latency by route, chat turns and their
overhead, tool calls by name and outcome (LLM latency and errors live in
`backend.agent.llm`). All on the process's default registry, served at `/metrics`."""

from __future__ import annotations

import time

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HTTP_REQUESTS = Counter("muarl_http_requests_total", "HTTP requests", ["method", "route", "status"])
HTTP_LATENCY = Histogram(
    "muarl_http_request_seconds", "HTTP request latency", ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
TOOL_CALLS = Counter("muarl_tool_calls_total", "Tool calls made by the chat agent", ["tool", "outcome"])
CHAT_TURNS = Counter("muarl_chat_turns_total", "Customer messages answered, by how the turn ended", ["reason"])
CHAT_TURNS_BY_VERSION = Counter("muarl_chat_turns_by_version_total",
                                "Customer messages answered, by the model version that answered", ["version", "reason"])
TURN_OVERHEAD = Histogram(
    "muarl_chat_turn_overhead_seconds", "Time of a chat turn spent outside the model",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
)


def metrics_response() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


class RequestMetrics:
    """ASGI middleware counting requests and timing them by route template (not raw path)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        scope.setdefault("state", {})["request_started"] = start  # turns measure their overhead from here
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None)
            if path is None:
                path = "/mcp" if scope.get("path", "").startswith("/mcp") else "<unmatched>"
            method = scope.get("method", "")
            HTTP_REQUESTS.labels(method, path, str(status)).inc()
            HTTP_LATENCY.labels(method, path).observe(time.perf_counter() - start)
