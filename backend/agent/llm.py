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
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

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
            response = await self._client.chat.completions.create(**kwargs)
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
        return _to_completion(response, self.name)


def _to_completion(response: Any, default_model: str) -> Completion:
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise LLMUnavailable("bad_response", "the model returned no choices")
    message = choices[0].message
    content = _THINK.sub("", message.content or "").strip()
    calls = []
    for i, call in enumerate(message.tool_calls or []):
        fn = getattr(call, "function", None)
        if fn is None:
            continue
        arguments = fn.arguments if isinstance(fn.arguments, str) else _dumps(fn.arguments)
        calls.append(ToolCallRequest(id=call.id or f"call_{i}", name=fn.name or "", arguments=arguments or ""))
    return Completion(content=content, tool_calls=calls, model=getattr(response, "model", None) or default_model)


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value)
