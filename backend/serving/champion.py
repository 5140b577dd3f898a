"""Which model answers a customer turn: the registry's champion, found once per turn, cheaply.

`ChampionResolver.resolve()` returns a `ServingTarget` (the version and a chat client for it on
its engine) or None when nothing can answer. The chat service calls it once when a turn starts
and keeps the target for the whole turn, so one turn is never answered by two versions, and a
promotion or rollback takes effect on the next customer message without restarting anything.

Cheap: the resolver keeps the champion in memory and holds one connection that LISTENs on
`muarl_model_aliases`; every alias change NOTIFYs on commit, which marks the cache stale, so a
turn normally costs no database work at all. Without a working listener (lost connection,
reconnecting) every turn reads the champion from the database instead; even with it the cache
is re-read after `MUARL_CHAMPION_RECHECK_S`, in case a notification was lost.

The champion comes first. With no champion, an endpoint configured by `MUARL_LLM_BASE_URL` /
`MUARL_LLM_MODEL` answers, recorded in the registry as an `external` version. With neither,
there is no target and chat answers 503; `add_no_model_detail(hook)` lets other parts (the
training cycle) add what they know to that answer, e.g. how far the first model's training is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend.agent.llm import ChatModel, OpenAICompatibleModel
from backend.config import Settings
from backend.serving.engines import chat_model
from backend.serving.registry import NOTIFY_CHANNEL, ModelRegistry, Version

log = structlog.get_logger(__name__)

RECONNECT_S = 1.0

NoModelHook = Callable[[], Awaitable[dict[str, Any] | None]]
_no_model_hooks: list[NoModelHook] = []


def add_no_model_detail(hook: NoModelHook) -> None:
    """Add `hook` to the 503 chat answers when no model can answer: it returns fields to add to
    the problem JSON (e.g. {"cycle": {...}}; a "detail_suffix" string is appended to the detail)."""
    if hook not in _no_model_hooks:
        _no_model_hooks.append(hook)


def remove_no_model_detail(hook: NoModelHook) -> None:
    if hook in _no_model_hooks:
        _no_model_hooks.remove(hook)


async def no_model_details() -> dict[str, Any]:
    """What the hooks add to the no-model answer (a failing hook is logged and left out)."""
    extra: dict[str, Any] = {}
    for hook in list(_no_model_hooks):
        try:
            extra.update(await hook() or {})
        except Exception:
            log.exception("serving.no_model_hook_failed")
    return extra


@dataclass(frozen=True)
class ServingTarget:
    """The version answering a turn and its chat client (`version` None: a model given in process,
    not from the registry)."""

    version: Version | None
    model: ChatModel

    @property
    def version_id(self) -> str | None:
        return self.version.id if self.version is not None else None

    @property
    def served_name(self) -> str:
        return self.version.served_name if self.version is not None else self.model.name


class ChampionResolver:
    def __init__(self, engine: AsyncEngine, settings: Settings) -> None:
        self.registry = ModelRegistry(engine)
        self.engine = engine
        self.settings = settings
        self.lookups = 0  # database reads of the champion (how cheap resolving is, measured)
        self._target: ServingTarget | None = None
        self._checked_at = float("-inf")
        self._invalidations = 0  # notifications (and lost listeners) so far
        self._seen = -1  # `_invalidations` when the cached target was read
        self._listening = False
        self._conn: AsyncConnection | None = None
        self._reconnect: asyncio.Task[None] | None = None
        self._closed = False
        self._lock = asyncio.Lock()
        self._clients: dict[str, OpenAICompatibleModel] = {}
        self._external: Version | None = None

    @property
    def external_configured(self) -> bool:
        return bool(self.settings.llm_base_url and self.settings.llm_model)

    @property
    def listening(self) -> bool:
        return self._listening

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> ChampionResolver:
        """Start listening for alias changes (best effort: without it every turn reads the champion)."""
        try:
            await self._listen()
        except Exception as e:
            log.warning("serving.listen_failed", error=repr(e))
            self._schedule_reconnect()
        return self

    async def close(self) -> None:
        self._closed = True
        if self._reconnect is not None:
            self._reconnect.cancel()
        await self._drop_listener()
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    async def _listen(self) -> None:
        conn = await self.engine.connect()
        try:
            raw = (await conn.get_raw_connection()).driver_connection
            await raw.add_listener(NOTIFY_CHANNEL, self._on_notify)
            raw.add_termination_listener(self._on_terminated)
        except BaseException:
            await conn.close()
            raise
        self._conn = conn
        self._invalidations += 1  # changes made while nobody listened
        self._listening = True
        log.info("serving.listening", channel=NOTIFY_CHANNEL)

    async def _drop_listener(self) -> None:
        conn, self._conn, self._listening = self._conn, None, False
        if conn is None:
            return
        try:
            raw = (await conn.get_raw_connection()).driver_connection
            raw.remove_termination_listener(self._on_terminated)
            if not raw.is_closed():
                await raw.remove_listener(NOTIFY_CHANNEL, self._on_notify)
        except Exception as e:  # the connection is gone anyway
            log.debug("serving.listener_close_failed", error=repr(e))
        await conn.invalidate()  # a listening connection does not go back to the pool
        await conn.close()

    def _on_notify(self, *_: Any) -> None:
        self._invalidations += 1

    def _on_terminated(self, *_: Any) -> None:
        self._listening = False
        self._invalidations += 1
        log.warning("serving.listener_lost")
        self._schedule_reconnect()

    def _schedule_reconnect(self) -> None:
        if self._closed or (self._reconnect is not None and not self._reconnect.done()):
            return

        async def again() -> None:
            await self._drop_listener()
            while not self._closed and not self._listening:
                await asyncio.sleep(RECONNECT_S)
                try:
                    await self._listen()
                except Exception as e:
                    log.debug("serving.listen_retry_failed", error=repr(e))

        self._reconnect = asyncio.get_running_loop().create_task(again())

    # -- resolving ----------------------------------------------------------------------

    def _fresh(self) -> bool:
        return (self._listening and self._seen == self._invalidations
                and time.monotonic() - self._checked_at < self.settings.champion_recheck_s)

    async def resolve(self) -> ServingTarget | None:
        """The target for a new turn (see the module docstring)."""
        if self._fresh():
            return self._target
        async with self._lock:
            if self._fresh():  # another turn just looked it up
                return self._target
            seen = self._invalidations  # before reading: a change committed meanwhile keeps it stale
            self.lookups += 1
            target = await self._lookup()
            self._target, self._seen, self._checked_at = target, seen, time.monotonic()
            return target

    async def _lookup(self) -> ServingTarget | None:
        version = await self.registry.champion()
        if version is None and self.external_configured:
            if self._external is None:
                assert self.settings.llm_base_url and self.settings.llm_model
                self._external = await self.registry.external_version(self.settings.llm_base_url,
                                                                      self.settings.llm_model)
            version = self._external
        if version is None:
            return None
        if self._target is not None and self._target.version_id == version.id:
            return self._target
        client = self._clients.get(version.id)
        if client is None:
            client = self._clients[version.id] = chat_model(version, self.settings)
        log.info("serving.champion", version=version.id, served_name=version.served_name, engine=version.engine)
        return ServingTarget(version, client)
