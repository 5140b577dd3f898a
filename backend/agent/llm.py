"""The one interface every model call goes through, and the one OpenAI-compatible client.

`ChatModel.complete(messages, tools)` takes OpenAI-shaped chat messages and tool schemas and
returns a `Completion`: the text and the tool calls the model asked for (arguments kept as the
raw text the model wrote, so malformed calls can be shown back to it; a call the model side could
not parse at all carries an `error`). Anything that can answer that is a model: the
OpenAI-compatible client below (vLLM serving Qwen3 with `--tool-call-parser hermes`, hosted APIs,
the test fake), an in-process policy of the RL side, a scripted one in tests.

`OpenAICompatibleModel` leaves retries to the openai SDK (timeouts, connection errors, 408, 429 and
5xx answers; a `Retry-After` header is honoured) with our base delay, and names every failure with
one taxonomy: `LLMUnavailable.kind` is timeout | connection | server_error | rate_limited |
rejected | bad_response. Chat answers the customer politely, episodes are excluded with cause
`policy_<kind>`. When a server runs without a tool-call parser, hermes `<tool_call>{...}</tool_call>`
blocks in the text are read as tool calls. Latency, failures and retries are Prometheus metrics.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import openai
import structlog
from openai._constants import INITIAL_RETRY_DELAY
from prometheus_client import Counter, Histogram

from backend.config import Settings, get_settings

log = structlog.get_logger(__name__)

LLM_LATENCY = Histogram(
    "muarl_llm_request_seconds", "Latency of one successful LLM completion (all attempts)", ["model"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
LLM_ERRORS = Counter("muarl_llm_errors_total", "LLM requests that failed after their retries, by kind",
                     ["model", "kind"])
LLM_RETRIES = Counter("muarl_llm_retries_total", "LLM attempts that failed and were retried", ["model"])

KINDS = ("timeout", "connection", "server_error", "rate_limited", "rejected", "bad_response")
_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)
HERMES_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


@dataclass
class ToolCallRequest:
    """One tool call the model asked for; `arguments` is the text it wrote (maybe not valid JSON).
    `error` is set when the model side could not read the call at all (the agent step answers it
    with that text and runs nothing); `raw` is what the model wrote for it, for logs."""

    id: str
    name: str
    arguments: str
    error: str | None = None
    raw: str | None = None


@dataclass
class Completion:
    content: str
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    model: str = ""
    latency_s: float = 0.0
    attempts: int = 1
    usage: dict[str, Any] = field(default_factory=dict)
    trace: Any = None  # an in-process policy's training data for this conversation (opaque here)

    @classmethod
    def from_message(cls, message: dict[str, Any], model: str, **kw: Any) -> Completion:
        """An OpenAI-shaped assistant message as a `Completion` (a call's `error`/`raw` keys kept)."""
        calls = []
        for i, c in enumerate(message.get("tool_calls") or []):
            fn = c.get("function") or {}
            args = fn.get("arguments")
            calls.append(ToolCallRequest(
                id=str(c.get("id") or f"call_{i}"), name=str(fn.get("name") or ""),
                arguments=args if isinstance(args, str) else json.dumps(args if args is not None else {}),
                error=c.get("error"), raw=c.get("raw")))
        return cls(content=str(message.get("content") or ""), tool_calls=calls, model=model, **kw)


class LLMUnavailable(Exception):
    """The model could not give an answer (after the retries where retrying makes sense)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # one of KINDS


class ChatModel(Protocol):
    """What the agent step needs from a model."""

    name: str

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion: ...


class _Client(openai.AsyncOpenAI):
    """The SDK client with our base delay for its retries (a server's `Retry-After` still wins)."""

    backoff_s: float = INITIAL_RETRY_DELAY

    def _calculate_retry_timeout(self, remaining_retries: int, options: Any,
                                 response_headers: Any = None) -> float:
        sdk = super()._calculate_retry_timeout(remaining_retries, options, response_headers)
        if self._parse_retry_after_header(response_headers) is not None:
            return sdk
        return sdk * self.backoff_s / INITIAL_RETRY_DELAY


class OpenAICompatibleModel:
    """A chat model behind an OpenAI-compatible `/v1/chat/completions` endpoint.

    `complete(messages, tools, **sampling)` takes per-call `temperature`, `max_tokens`, `seed` and
    any other request field; the constructor's values are the defaults."""

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0,
                 max_retries: int = 2, backoff_s: float = INITIAL_RETRY_DELAY, temperature: float | None = None,
                 max_tokens: int | None = None, seed: int | None = None,
                 extra_body: dict[str, Any] | None = None) -> None:
        self.name = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.defaults: dict[str, Any] = {k: v for k, v in (("temperature", temperature), ("max_tokens", max_tokens),
                                                            ("seed", seed)) if v is not None}
        self.defaults.update(extra_body or {})
        self._client = _Client(base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout_s,
                               max_retries=self.max_retries)
        self._client.backoff_s = max(0.0, backoff_s)

    @classmethod
    def from_settings(cls, settings: Settings | None = None, *, model: str | None = None,
                      base_url: str | None = None, **overrides: Any) -> OpenAICompatibleModel | None:
        """The model `model` (default `MUARL_LLM_MODEL`) at `base_url` (default `MUARL_LLM_BASE_URL`)
        with the settings' key, timeout and retries; None when no endpoint or model is known."""
        s = settings or get_settings()
        url, name = base_url or s.llm_base_url, model or s.llm_model
        if not url or not name:
            return None
        options: dict[str, Any] = {"api_key": s.llm_api_key, "timeout_s": s.llm_timeout_s,
                                   "max_retries": s.llm_max_retries, "backoff_s": s.llm_retry_backoff_s,
                                   "temperature": s.llm_temperature}
        options.update({k: v for k, v in overrides.items() if v is not None})
        return cls(base_url=url, model=name, **options)

    async def close(self) -> None:
        await self._client.close()

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                       **sampling: Any) -> Completion:
        start = time.perf_counter()
        body: dict[str, Any] = {"model": self.name, "messages": messages, **self.defaults, **sampling}
        if tools:
            body["tools"] = tools
            body.setdefault("tool_choice", "auto")
        try:
            # the client's documented raw-request path: same auth, errors, timeouts and retries as
            # `chat.completions.create`, without walking every message and tool schema through its
            # typed request transform (about 8 ms of CPU per call with 16 tools)
            response = await self._client.post("/chat/completions", body=body, cast_to=httpx.Response)
            payload = response.json()
        except openai.APITimeoutError as e:
            raise self._failed("timeout", f"the model did not answer within {self.timeout_s:g} s", e) from None
        except openai.APIConnectionError as e:
            raise self._failed("connection", f"cannot reach the model at {self.base_url}: {e}", e) from None
        except openai.RateLimitError as e:
            raise self._failed("rate_limited", f"the model endpoint is rate limiting: {e.message}", e) from None
        except openai.APIStatusError as e:
            kind = "server_error" if e.status_code >= 500 or e.status_code == 408 else "rejected"
            raise self._failed(kind, f"the model endpoint answered {e.status_code}: {e.message}", e) from None
        except openai.APIError as e:  # unparseable bodies and the like
            raise self._failed("bad_response", f"the model endpoint gave a bad answer: {e}", e) from None
        except ValueError as e:
            raise self._failed("bad_response", f"the model endpoint answered something that is not JSON: {e}",
                               None) from None
        attempts = _attempts(response.request)
        try:
            completion = _to_completion(payload, self.name)
        except LLMUnavailable as e:
            raise self._failed(e.kind, str(e), None) from None
        completion.latency_s = time.perf_counter() - start
        completion.attempts = attempts
        if attempts > 1:
            LLM_RETRIES.labels(self.name).inc(attempts - 1)
        LLM_LATENCY.labels(self.name).observe(completion.latency_s)
        return completion

    def _failed(self, kind: str, message: str, error: Exception | None) -> LLMUnavailable:
        request = getattr(error, "request", None)
        attempts = _attempts(request) if request is not None else 1
        if attempts > 1:
            LLM_RETRIES.labels(self.name).inc(attempts - 1)
        LLM_ERRORS.labels(self.name, kind).inc()
        log.warning("llm.failed", model=self.name, kind=kind, attempts=attempts, error=message)
        return LLMUnavailable(kind, message)


def _attempts(request: Any) -> int:
    """How many attempts the SDK made for the request it last sent (it numbers its retries)."""
    try:
        return int(request.headers.get("x-stainless-retry-count", 0)) + 1
    except (AttributeError, ValueError, RuntimeError):
        return 1


def parse_hermes(content: str) -> tuple[str, list[ToolCallRequest]]:
    """Split hermes `<tool_call>` blocks out of text; returns (remaining text, tool calls). A block
    that is not a JSON object with a name stays text (the model's own mistake, answered as such)."""
    calls = []
    for i, m in enumerate(HERMES_CALL.finditer(content)):
        try:
            obj = json.loads(m.group(1))
        except ValueError:
            continue
        if not isinstance(obj, dict) or "name" not in obj:
            continue
        calls.append(ToolCallRequest(id=f"call_h{i}", name=str(obj["name"]),
                                     arguments=json.dumps(obj.get("arguments", {}))))
    if not calls:
        return content, []
    return HERMES_CALL.sub("", content).strip(), calls


def _to_completion(payload: Any, default_model: str) -> Completion:
    """A chat-completions JSON answer as a `Completion` (anything malformed is a bad response)."""
    try:
        message = payload["choices"][0]["message"]
        content = message.get("content") or ""
        raw_calls = message.get("tool_calls") or []
        if not isinstance(content, str) or not isinstance(raw_calls, list):
            raise TypeError("content must be text and tool_calls a list")
        calls = []
        for i, call in enumerate(raw_calls):
            fn = call.get("function") or {}
            arguments = fn.get("arguments")
            if not isinstance(arguments, str):
                arguments = "" if arguments is None else json.dumps(arguments)
            calls.append(ToolCallRequest(id=str(call.get("id") or f"call_{i}"), name=str(fn.get("name") or ""),
                                         arguments=arguments))
        model = payload.get("model") or default_model
        usage = payload.get("usage") or {}
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise LLMUnavailable("bad_response", f"the model endpoint's answer has no usable message: {e!r}") from None
    content = _THINK.sub("", content).strip()
    if not calls and "<tool_call>" in content:  # a server without a tool-call parser
        content, calls = parse_hermes(content)
    return Completion(content=content, tool_calls=calls, model=str(model),
                      usage=usage if isinstance(usage, dict) else {})
