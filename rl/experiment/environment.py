"""The experiment's store side: one snapshot of the store, a sandbox pool (started when first
needed, released while the evaluation harness runs its own) and the gold-state cache, living on a
background event loop so the (synchronous) trainers can run episodes on it."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from backend.store.tau_data import StoreData
from rl.env import GoldStateCache, SandboxPool, Snapshot
from rl.env.ownership import sweep_orphan_databases
from rl.env.pools import StorePools
from rl.grpo.rollout import BackgroundLoop

T = TypeVar("T")


class ExperimentEnv:
    def __init__(self, server_url: str | None, data: StoreData, ref: str, pool_size: int = 32, *,
                 max_sandboxes: int | None = None, snapshot: Snapshot | None = None) -> None:
        """`max_sandboxes` caps the sandboxes (each one server connection) that this environment's
        pools hold at once, e.g. a share of the server's connections when several environments run
        side by side (rl/experiment/parallel.py); None: as many as the server allows. With
        `snapshot` (an existing `Snapshot` of `data`, e.g. an online cycle's) the environment uses it
        and leaves it in place, instead of making and dropping its own."""
        self.stores = StorePools(server_url, size=pool_size, max_sandboxes=max_sandboxes, data={ref: data},
                                 snapshots={ref: snapshot} if snapshot is not None else None,
                                 name_prefix="paper_")
        self.server_url, self.ref = self.stores.server_url, ref
        self.max_sandboxes = max_sandboxes
        self.cache = GoldStateCache()
        self._loop: BackgroundLoop | None = None
        self._snapshot: Snapshot | None = None
        self._pool: SandboxPool | None = None

    @property
    def loop(self) -> BackgroundLoop:
        """The background event loop the environment's pools live on (inside `with` only)."""
        if self._loop is None:
            raise RuntimeError("the experiment environment is not open (use it in a `with` block)")
        return self._loop

    @property
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            raise RuntimeError("the experiment environment is not open (use it in a `with` block)")
        return self._snapshot

    @property
    def pool(self) -> SandboxPool:
        """The sandbox pool for rollouts and cold-start data, started on first use."""
        if self._pool is None:
            self._pool = self.run(self.stores.pool(self.ref))
        return self._pool

    def release_pool(self) -> None:
        """Drop the pool's sandboxes (and their connections), e.g. while the evaluation harness runs
        its own pool, so the two never hold the server's connections at once."""
        if self._pool is not None:
            self._pool = None
            self.run(self.stores.release())

    def __enter__(self) -> ExperimentEnv:
        self._loop = BackgroundLoop()
        try:
            # databases a killed run left behind (their owner process is gone) are reclaimed first
            self.run(sweep_orphan_databases(self.server_url))
            self._snapshot = self.run(self.stores.snapshot(self.ref))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self.loop
        try:
            self._pool = None
            loop.run(self.stores.close())
        finally:
            loop.close()
            self._loop = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the environment's loop and wait for its result."""
        return self.loop.run(coro)
