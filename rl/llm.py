"""One small client for OpenAI-compatible chat endpoints (vLLM, hosted APIs, the test fake).

`ChatEndpoint(model, base_url, ...)` wraps `openai.AsyncOpenAI` with a per-call timeout and its own
bounded retries (connection errors, timeouts and 5xx answers are retried with a short backoff; 4xx
answers are not). When it gives up it raises `EndpointUnavailable` with a `kind` ("timeout",
"unavailable", "bad_request", "bad_response"), which the policy and the simulator turn into the
excluded-episode causes of the runner.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai

from backend.config import get_settings


class EndpointUnavailable(RuntimeError):
    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class ChatEndpoint:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float | None = None, max_retries: int | None = None, backoff_s: float = 0.2) -> None:
        s = get_settings()
        self.model = model
        self.base_url = base_url or s.llm_base_url
        if not self.base_url:
            raise ValueError(f"no endpoint for model {model!r}: pass a base URL or set MUARL_LLM_BASE_URL")
        self.timeout_s = timeout_s if timeout_s is not None else s.llm_timeout_s
        self.max_retries = max_retries if max_retries is not None else s.llm_max_retries
        self.backoff_s = backoff_s
        self.client = openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key or s.llm_api_key or "EMPTY",
                                         timeout=self.timeout_s, max_retries=0)

    async def chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """One chat completion, retried up to `max_retries` times on transient failures."""
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            try:
                resp = await self.client.chat.completions.create(model=self.model, messages=messages, **kwargs)
                if not getattr(resp, "choices", None):
                    raise EndpointUnavailable("the endpoint answered without choices", "bad_response")
                return resp
            except openai.APITimeoutError as e:
                last = EndpointUnavailable(f"timed out after {self.timeout_s:g} s: {e}", "timeout")
            except openai.APIConnectionError as e:
                last = EndpointUnavailable(f"cannot reach {self.base_url}: {e}", "unavailable")
            except openai.APIStatusError as e:
                if e.status_code < 500 and e.status_code != 429:
                    raise EndpointUnavailable(f"the endpoint refused the request ({e.status_code}): {e}",
                                              "bad_request") from None
                last = EndpointUnavailable(f"endpoint error {e.status_code}: {e}", "unavailable")
            except EndpointUnavailable as e:
                last = e
            except (ValueError, TypeError) as e:  # an unparseable body
                last = EndpointUnavailable(f"unreadable answer: {e}", "bad_response")
            if attempt < self.max_retries:
                await asyncio.sleep(self.backoff_s * (2 ** attempt))
        assert last is not None
        raise last

    async def close(self) -> None:
        await self.client.close()
