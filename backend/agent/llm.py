"""The one small interface every LLM call goes through, and its OpenAI-compatible implementation.

`ChatModel.complete(messages, tools)` takes OpenAI-shaped chat messages and tool schemas and
returns a `Completion`: the text and the tool calls the model asked for (arguments kept as
the raw text the model wrote, so malformed calls can be shown back to it). The
OpenAI-compatible model works with vLLM serving Qwen3 (`--enable-auto-tool-choice
--tool-call-parser hermes`) and with hosted APIs. Timeouts, connection failures, rate
limits and 5xx answers are retried a bounded number of times with exponential backoff;
when the model still cannot answer, `LLMUnavailable` says why and the caller answers the
customer politely. Latency and errors are exported as Prometheus metrics.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import structlog
from prometheus_client import Counter, Histogram

from backend.config import Settings

log = structlog.get_logger(__name__)

LLM_LATENCY = Histogram(
    "muarl_llm_request_seconds", "Latency of one successful LLM completion (all attempts)", ["model"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
LLM_ERRORS = Counter("muarl_llm_errors_total", "Failed LLM attempts by kind", ["model", "kind"])

_THINK = re.compile(r"<think>.*?</think>\s*", re.DOTALL)


@dataclass
class ToolCallRequest:
    """One tool call the model asked for; `arguments` is the text it wrote (maybe not valid JSON)."""

    id: str
    name: str
    arguments: str


@dataclass
class Completion:
    content: str
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    model: str = ""
    latency_s: float = 0.0
    attempts: int = 1


class LLMUnavailable(Exception):
    """The model could not give an answer (after retries where retrying makes sense)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # timeout | connection | server_error | rate_limited | rejected | bad_response


class ChatModel(Protocol):
    """What the agent loop needs from a model."""

    name: str

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion: ...


class OpenAICompatibleModel:
    """A chat model behind an OpenAI-compatible `/v1/chat/completions` endpoint."""

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0,
                 max_retries: int = 2, backoff_s: float = 0.5, temperature: float | None = None) -> None:
        from openai import AsyncOpenAI

        self.name = model
        self.base_url = base_url
        self.max_retries = max(0, max_retries)
        self.backoff_s = max(0.0, backoff_s)
        self.temperature = temperature
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout_s,
                                   max_retries=0)

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatibleModel | None:
        """The configured model, or None when `MUARL_LLM_BASE_URL` / `MUARL_LLM_MODEL` are unset."""
        if not settings.llm_base_url or not settings.llm_model:
            return None
        return cls(base_url=settings.llm_base_url, model=settings.llm_model, api_key=settings.llm_api_key,
                   timeout_s=settings.llm_timeout_s, max_retries=settings.llm_max_retries,
                   backoff_s=settings.llm_retry_backoff_s, temperature=settings.llm_temperature)

    async def close(self) -> None:
        await self._client.close()

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        start = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            try:
                completion = await self._once(messages, tools)
            except LLMUnavailable as e:
                LLM_ERRORS.labels(self.name, e.kind).inc()
                retryable = e.kind in ("timeout", "connection", "server_error", "rate_limited")
                log.warning("llm.failed", model=self.name, kind=e.kind, attempt=attempt, error=str(e),
                            retrying=retryable and attempt <= self.max_retries)
                if not retryable or attempt > self.max_retries:
                    raise
                delay = self.backoff_s * (2 ** (attempt - 1))
                await asyncio.sleep(delay * (0.75 + 0.5 * random.random()))
                continue
            completion.latency_s = time.perf_counter() - start
            completion.attempts = attempt
            LLM_LATENCY.labels(self.name).observe(completion.latency_s)
            return completion

    async def _once(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        import openai

        kwargs: dict[str, Any] = {"model": self.name, "messages": messages}
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = "auto"
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        try:
            # the client's documented raw-request path: same auth, errors and timeouts as
            # `chat.completions.create`, without walking every message and tool schema through
            # its typed request transform (about 8 ms of CPU per call with 16 tools)
            response = await self._client.post("/chat/completions", body=kwargs, cast_to=httpx.Response)
            payload = response.json()
        except openai.APITimeoutError as e:
            raise LLMUnavailable("timeout", f"the model did not answer in time: {e}") from None
        except openai.APIConnectionError as e:
            raise LLMUnavailable("connection", f"cannot reach the model at {self.base_url}: {e}") from None
        except openai.RateLimitError as e:
            raise LLMUnavailable("rate_limited", f"the model endpoint is rate limiting: {e}") from None
        except openai.APIStatusError as e:
            kind = "server_error" if e.status_code >= 500 or e.status_code == 408 else "rejected"
            raise LLMUnavailable(kind, f"the model endpoint answered {e.status_code}: {e.message}") from None
        except openai.APIError as e:  # unparseable bodies and the like
            raise LLMUnavailable("bad_response", f"the model endpoint gave a bad answer: {e}") from None
        except ValueError as e:
            raise LLMUnavailable("bad_response", f"the model endpoint answered something that is not JSON: {e}") \
                from None
        return _to_completion(payload, self.name)


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
    except (KeyError, IndexError, TypeError, AttributeError) as e:
        raise LLMUnavailable("bad_response", f"the model endpoint's answer has no usable message: {e!r}") from None
    return Completion(content=_THINK.sub("", content).strip(), tool_calls=calls, model=str(model))
