"""The local engine's HTTP face, shaped like vLLM's OpenAI server so that the backend talks to both
the same way: `POST /v1/chat/completions` (tools; hermes tool calls come back as OpenAI
`tool_calls`), `GET /v1/models`, `POST /v1/load_lora_adapter {"lora_name", "lora_path"}` (a LoRA
adapter folder, or a full model folder, served under that name; 200 with vLLM's text),
`POST /v1/unload_lora_adapter {"lora_name"}`, `GET /health`, and `GET /stats` (per model: requests,
batched generations, largest batch, tokens).

Errors are vLLM's JSON, `{"error": {"message", "type", "param", "code"}}`: 400 for a request that is
malformed or asks for something this engine does not do (streaming, n > 1, forced tool choice, stop
sequences, ...), 404 for an unknown model or adapter, 500 only when generation itself fails.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from rl.serving.engine import EngineError, ModelPool


class _Function(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str = Field(min_length=1)
    parameters: dict[str, Any] | None = None


class _Tool(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["function"]
    function: _Function


class _CallFunction(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: str | dict[str, Any] = "{}"


class _Call(BaseModel):
    model_config = ConfigDict(extra="allow")
    function: _CallFunction


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: Literal["text"]
    text: str


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[_Part] | None = None
    tool_calls: list[_Call] | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1)
    messages: list[_Message] = Field(min_length=1)
    tools: list[_Tool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int = 1
    stream: bool = False
    top_p: float | None = None
    stop: str | list[str] | None = None
    logprobs: bool | None = None
    response_format: dict[str, Any] | None = None

    def unsupported(self) -> tuple[str, str] | None:
        """(parameter, why) for what this engine does not do, rather than silently ignoring it."""
        if self.stream:
            return "stream", "streaming is not supported by the local engine"
        if self.n != 1:
            return "n", "only n=1 is supported by the local engine"
        if self.tool_choice not in (None, "auto", "none"):
            return "tool_choice", "tool_choice must be 'auto' or 'none' on the local engine"
        if self.top_p not in (None, 1.0):
            return "top_p", "top_p is not supported by the local engine (temperature sampling only)"
        if self.stop:
            return "stop", "stop sequences are not supported by the local engine"
        if self.logprobs:
            return "logprobs", "logprobs are not supported by the local engine"
        if self.response_format and self.response_format.get("type") != "text":
            return "response_format", "only text responses are supported by the local engine"
        return None


class LoadRequest(BaseModel):
    lora_name: str = ""
    lora_path: str = ""


class UnloadRequest(BaseModel):
    lora_name: str = ""


def error_body(status: int, message: str, kind: str, param: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}},
                        status_code=status)


def _messages(req: ChatRequest, raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the policy takes it: text content, `developer` read as `system`."""
    out = []
    for m, r in zip(req.messages, raw, strict=True):
        msg = dict(r)
        if isinstance(m.content, list):
            msg["content"] = "".join(p.text for p in m.content)
        if m.role == "developer":
            msg["role"] = "system"
        out.append(msg)
    return out


def create_app(pool: ModelPool) -> FastAPI:
    app = FastAPI(title="muarl model server", docs_url=None, redoc_url=None)
    app.state.pool = pool

    @app.exception_handler(EngineError)
    async def _engine_error(_: Request, e: EngineError) -> JSONResponse:
        return error_body(e.status, e.message, e.kind, e.param)

    async def _body(request: Request) -> Any:
        try:
            return json.loads(await request.body())
        except ValueError as e:
            raise EngineError(400, f"the request body is not JSON: {e}") from None

    def _validate(model: type[BaseModel], body: Any) -> Any:
        try:
            return model.model_validate(body)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise EngineError(400, f"invalid request: {where}: {first['msg']} ({e.error_count()} error(s))",
                              param=where or None) from None

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        return error_body(e.status_code, str(e.detail), "NotFoundError" if e.status_code == 404 else "BadRequestError")

    @app.get("/health")
    async def health() -> PlainTextResponse:
        return PlainTextResponse("")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [m.card() for m in pool.models.values()]}

    @app.get("/stats")
    async def stats() -> dict[str, Any]:
        return pool.stats()

    @app.post("/v1/load_lora_adapter")
    async def load(request: Request) -> PlainTextResponse:
        req = _validate(LoadRequest, await _body(request))
        served = await pool.load(req.lora_name, req.lora_path)
        what = "LoRA adapter" if served.kind == "lora" else "model"
        return PlainTextResponse(f"Success: {what} '{served.name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload(request: Request) -> PlainTextResponse:
        req = _validate(UnloadRequest, await _body(request))
        served = await pool.unload(req.lora_name)
        what = "LoRA adapter" if served.kind == "lora" else "model"
        return PlainTextResponse(f"Success: {what} '{served.name}' removed successfully.")

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await _body(request)
        req: ChatRequest = _validate(ChatRequest, body)
        problem = req.unsupported()
        if problem is not None:
            raise EngineError(400, problem[1], param=problem[0])
        pool.get(req.model)  # 404 before anything else
        tools = body.get("tools") if req.tool_choice != "none" else None
        sampling = pool.sampling(req.temperature, req.max_completion_tokens or req.max_tokens)
        try:
            answer = await pool.chat(req.model, _messages(req, body["messages"]), tools, sampling)
        except EngineError:
            raise
        except Exception as e:  # noqa: BLE001 - a failed generation is the engine's fault: 500, said plainly
            return error_body(500, f"generation failed: {type(e).__name__}: {e}", "InternalServerError")
        return JSONResponse(answer)

    return app
