"""A small fake OpenAI-compatible chat-completions server for tests and benchmarks.

It stands in for the one thing outside the project the agent talks to: an LLM endpoint.
It serves `POST /v1/chat/completions` on a loopback port (in a thread with its own event
loop, or as a process: `python -m tests.fakes.openai_server --port P --responder bench`)
and answers each request with what a *responder* decides: a scripted sequence of steps for
tests (`Script([tool_call(...), text(...)])`), or a function of the request. Steps can be
text, tool calls (arguments as a dict or raw text, so malformed calls can be replayed),
HTTP errors and delays. Every request body is kept in `requests` for assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass
class Step:
    """One answer of the fake model."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    delay_s: float = 0.0
    raw_body: str | None = None  # answer this exact body (for garbage responses)


def text(content: str, *, delay_s: float = 0.0) -> Step:
    return Step(content=content, delay_s=delay_s)


def tool_call(name: str, arguments: dict[str, Any] | str, *, call_id: str | None = None,
              content: str = "") -> Step:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return Step(content=content, tool_calls=[{"id": call_id or f"call_{name}_{int(time.time() * 1e6) % 10**9}",
                                              "type": "function", "function": {"name": name, "arguments": args}}])


def tool_calls(*calls: tuple[str, dict[str, Any] | str]) -> Step:
    steps = [tool_call(n, a, call_id=f"call_{i}") for i, (n, a) in enumerate(calls)]
    return Step(tool_calls=[s.tool_calls[0] for s in steps])


def error(status: int = 500, *, delay_s: float = 0.0) -> Step:
    return Step(status=status, delay_s=delay_s)


def delay(seconds: float) -> Step:
    """A model that takes `seconds` to answer (longer than the client's timeout: a timeout)."""
    return Step(content="(too late)", delay_s=seconds)


Responder = Callable[[dict[str, Any]], Step]


class Script:
    """Answers requests with the given steps, in order; fails loudly when they run out."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Step:
        with self._lock:
            if not self.steps:
                return Step(status=500, content="fake model: script exhausted")
            return self.steps.pop(0)

    def extend(self, steps: list[Step]) -> None:
        with self._lock:
            self.steps.extend(steps)

    @property
    def remaining(self) -> int:
        return len(self.steps)


def completion_body(step: Step, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.content or None}
    if step.tool_calls:
        message["tool_calls"] = step.tool_calls
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if step.tool_calls else "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


class FakeOpenAIServer:
    """The fake endpoint, served by uvicorn in a background thread on 127.0.0.1."""

    def __init__(self, responder: Responder, *, model: str = "fake-model", keep_requests: bool = True) -> None:
        self.responder = responder
        self.model = model
        self.keep_requests = keep_requests
        self.requests: list[dict[str, Any]] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def app(self) -> Starlette:
        async def completions(request: Request) -> Response:
            body = await request.json()
            if self.keep_requests:
                self.requests.append(body)
            step = self.responder(body)
            if step.delay_s:
                await asyncio.sleep(step.delay_s)
            if step.status != 200:
                return JSONResponse({"error": {"message": step.content or "fake failure", "type": "server_error"}},
                                    status_code=step.status)
            if step.raw_body is not None:
                return Response(step.raw_body, media_type="application/json")
            return JSONResponse(completion_body(step, body.get("model") or self.model))

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": self.model, "object": "model"}]})

        return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]),
                                 Route("/v1/models", models)])

    def start(self) -> FakeOpenAIServer:
        config = uvicorn.Config(self.app(), log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- a stateless responder for benchmarks ----------------------------------------------------

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
_ORDER = re.compile(r"#W\d+")


def bench_responder(request: dict[str, Any]) -> Step:
    """Looks up what the customer mentions (an email, then an order) and answers in text."""
    messages = request.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return text(f"Here is what I found: {str(last.get('content', ''))[:80]}")
    said = str(last.get("content", ""))
    if m := _EMAIL.search(said):
        return tool_call("find_user_id_by_email", {"email": m.group(0)})
    if m := _ORDER.search(said):
        return tool_call("get_order_details", {"order_id": m.group(0)})
    return text("How can I help you today?")


RESPONDERS: dict[str, Responder] = {"bench": bench_responder}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--responder", default="bench", choices=sorted(RESPONDERS))
    args = parser.parse_args()
    server = FakeOpenAIServer(RESPONDERS[args.responder], keep_requests=False)
    app = server.app()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False, lifespan="off")


if __name__ == "__main__":
    main()
