"""The agent as any OpenAI-compatible tool-calling model (vLLM with Qwen3's hermes parser, hosted APIs).

A thin binding of the one client (`backend.agent.llm.OpenAICompatibleModel`: retries, error kinds,
hermes calls in text) to episodes: each episode's model sends the episode's seed and the policy's
sampling settings with every call. Endpoint failures raise `LLMUnavailable` (excluded as
`policy_<kind>`).
"""

from __future__ import annotations

from typing import Any

from backend.agent.llm import Completion, OpenAICompatibleModel
from rl.tasks.schema import Task


class OpenAIPolicy:
    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float | None = None, max_retries: int | None = None, temperature: float = 0.0,
                 max_tokens: int = 1024, extra_body: dict[str, Any] | None = None) -> None:
        client = OpenAICompatibleModel.from_settings(model=model, base_url=base_url, api_key=api_key,
                                                     timeout_s=timeout_s, max_retries=max_retries,
                                                     temperature=temperature, max_tokens=max_tokens,
                                                     extra_body=extra_body)
        if client is None:
            raise ValueError(f"no endpoint for model {model!r}: pass a base URL or set MUARL_LLM_BASE_URL")
        self.client = client
        self.name = f"openai:{model}"
        self.model = model

    def session(self, task: Task, seed: int) -> SeededModel:
        del task
        return SeededModel(self.client, seed)


class SeededModel:
    """The policy's client for one episode: every call carries the episode's seed."""

    def __init__(self, client: OpenAICompatibleModel, seed: int) -> None:
        self.client, self.seed, self.name = client, seed, client.name

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        return await self.client.complete(messages, tools, seed=self.seed)


def openai_policy(model: str, **options: Any) -> OpenAIPolicy:
    """`openai:MODEL`."""
    if not model:
        raise ValueError("openai policy needs a model: --policy openai:MODEL")
    return OpenAIPolicy(model, **options)
