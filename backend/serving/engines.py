"""How to reach a version's engine over HTTP, and how to make an engine serve a version.

A version names its engine: `local` (our `muarl model-server`, at `MUARL_MODEL_SERVER_URL`),
`vllm` (a vLLM server, at `MUARL_VLLM_BASE_URL`) or `external` (an endpoint given by
configuration; its URL is the version's artifact location). Every engine speaks the OpenAI
API under its base URL, so chat, gates and benchmarks send `model=<served name>` and never
care which engine it is.

Before a promotion switches the alias, `ensure_served` makes sure the engine answers for the
version: an adapter is loaded under its versioned served name with vLLM's
`POST /v1/load_lora_adapter {"lora_name", "lora_path"}` (the local model server has the same
endpoint; "already loaded" counts as loaded). A full model must be listed by `GET /v1/models`:
vLLM serves a full model under the name it was launched with, while the local model server also
loads a full model folder at run time through the same load endpoint, so there it is loaded.
No torch and nothing of `rl/` here: the backend only reads the registry and talks HTTP.
"""

from __future__ import annotations

from typing import Any

import httpx

from backend.agent.llm import OpenAICompatibleModel
from backend.config import Settings
from backend.serving.registry import RegistryError, Version


class EngineError(RegistryError):
    """The version's engine is not configured, not reachable, or refused to serve it."""

    status = 503


def engine_base_url(version: Version, settings: Settings) -> str:
    """The OpenAI base URL (ending in /v1) of the engine serving `version`."""
    if version.engine == "external":
        return version.artifact_uri
    if version.engine == "local":
        return settings.model_server_url.rstrip("/")
    if version.engine == "vllm":
        if not settings.vllm_base_url:
            raise EngineError(f"{version.id} is served by vLLM, but MUARL_VLLM_BASE_URL is not set")
        return settings.vllm_base_url.rstrip("/")
    raise EngineError(f"{version.id} names an unknown engine {version.engine!r}")


def chat_model(version: Version, settings: Settings) -> OpenAICompatibleModel:
    """A chat client that asks the version's engine for the version (by its served name)."""
    return OpenAICompatibleModel(
        base_url=engine_base_url(version, settings), model=version.served_name,
        api_key=settings.llm_api_key if version.engine == "external" else None,
        timeout_s=settings.llm_timeout_s, max_retries=settings.llm_max_retries,
        backoff_s=settings.llm_retry_backoff_s, temperature=settings.llm_temperature)


async def served_models(base_url: str, settings: Settings) -> list[str]:
    """The model names `GET {base_url}/models` lists."""
    async with httpx.AsyncClient(timeout=settings.engine_timeout_s) as client:
        try:
            r = await client.get(f"{base_url}/models")
        except httpx.HTTPError as e:
            raise EngineError(f"the engine at {base_url} is not reachable: {e!r}") from None
    if r.status_code != 200:
        raise EngineError(f"the engine at {base_url} answered {r.status_code} to GET /models")
    try:
        data: Any = r.json().get("data") or []
        return [str(m.get("id")) for m in data if isinstance(m, dict)]
    except (ValueError, AttributeError):
        raise EngineError(f"the engine at {base_url} answered GET /models with no model list") from None


async def load_adapter(version: Version, settings: Settings) -> None:
    """Load an adapter version on its engine under its served name (idempotent)."""
    base_url = engine_base_url(version, settings)
    body = {"lora_name": version.served_name, "lora_path": version.artifact_uri}
    async with httpx.AsyncClient(timeout=settings.engine_timeout_s) as client:
        try:
            r = await client.post(f"{base_url}/load_lora_adapter", json=body)
        except httpx.HTTPError as e:
            raise EngineError(f"the engine at {base_url} is not reachable: {e!r}") from None
    if r.status_code == 200 or (r.status_code == 400 and "already" in r.text.lower()):
        return
    raise EngineError(f"the engine at {base_url} refused to load {version.id} as {version.served_name!r} "
                      f"({r.status_code}: {r.text[:300]})")


async def unload_adapter(version: Version, settings: Settings) -> None:
    base_url = engine_base_url(version, settings)
    async with httpx.AsyncClient(timeout=settings.engine_timeout_s) as client:
        try:
            r = await client.post(f"{base_url}/unload_lora_adapter", json={"lora_name": version.served_name})
        except httpx.HTTPError as e:
            raise EngineError(f"the engine at {base_url} is not reachable: {e!r}") from None
    if r.status_code not in (200, 404):
        raise EngineError(f"the engine at {base_url} refused to unload {version.served_name!r} ({r.status_code})")


async def ensure_served(version: Version, settings: Settings) -> None:
    """Make the version's engine answer for it, or say why it cannot (see the module docstring)."""
    if version.engine == "external":
        return  # configured by hand: nothing we can load there
    if version.kind == "adapter":
        await load_adapter(version, settings)
        return
    base_url = engine_base_url(version, settings)
    if version.served_name in await served_models(base_url, settings):
        return
    missing = f"the {version.engine} engine at {base_url} does not serve {version.served_name!r} ({version.id})"
    if version.engine == "vllm":
        raise EngineError(f"{missing}; launch it with `muarl serving vllm-command --version {version.id}`")
    try:
        await load_adapter(version, settings)  # the local model server loads full folders too
    except EngineError as e:
        raise EngineError(f"{missing} and could not load it: {e}") from None
