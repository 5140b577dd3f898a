"""A fake serving engine for the registry tests: the fake OpenAI server (the only fake, standing in
for vLLM / the model server, which are outside the backend) plus vLLM's adapter endpoints and a
`/v1/models` list of what it serves. By default it answers every chat request with
"answered by <requested model>", so a test can see which version answered a turn."""

from __future__ import annotations

import threading
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from tests.fakes.openai_server import FakeOpenAIServer, Responder, Step, text


def echo_model(request: dict[str, Any]) -> Step:
    return text(f"answered by {request.get('model')}")


class FakeEngine(FakeOpenAIServer):
    def __init__(self, responder: Responder = echo_model, *, serves: list[str] | None = None) -> None:
        super().__init__(responder)
        self.served: list[str] = list(serves or [])
        self.loads: list[dict[str, Any]] = []
        self.refuse_loads = False
        self._served_lock = threading.Lock()

    def app(self) -> Starlette:
        base = super().app()

        async def models(request: Request) -> JSONResponse:
            with self._served_lock:
                names = list(self.served)
            return JSONResponse({"object": "list", "data": [{"id": n, "object": "model"} for n in names]})

        async def load(request: Request) -> Response:
            body = await request.json()
            self.loads.append(body)
            if self.refuse_loads:
                return JSONResponse({"error": {"message": "cannot load"}}, status_code=500)
            with self._served_lock:
                if body["lora_name"] in self.served:
                    return JSONResponse({"error": {"message": f"The lora adapter '{body['lora_name']}' has "
                                                              "already been loaded."}}, status_code=400)
                self.served.append(body["lora_name"])
            return PlainTextResponse(f"Success: LoRA adapter '{body['lora_name']}' added successfully.")

        routes = [r for r in base.routes if getattr(r, "path", "") != "/v1/models"]
        return Starlette(routes=[*routes, Route("/v1/models", models),
                                 Route("/v1/load_lora_adapter", load, methods=["POST"])])
