"""The experiment's store side: one snapshot of the store, a sandbox pool (started when first
needed, released while the evaluation harness runs its own) and the gold-state cache, living on a
background event loop so the (synchronous) trainers can run episodes on it."""

from __future__ import annotations

from typing import Any

from rl.grpo.rollout import BackgroundLoop


class ExperimentEnv:
    def __init__(self, server_url: str | None, data: dict[str, Any], ref: str, pool_size: int = 32, *,
                 max_sandboxes: int | None = None, snapshot: Any = None) -> None:
        """`max_sandboxes` caps the sandboxes (each one server connection) that this environment's
        pools hold at once, e.g. a share of the server's connections when several environments run
        side by side (rl/experiment/parallel.py); None: as many as the server allows. With
        `snapshot` (an existing `Snapshot` of `data`, e.g. an online cycle's) the environment uses it
        and leaves it in place, instead of making and dropping its own."""
        from backend.db.engine import database_url, normalize_url

        self.server_url = normalize_url(server_url) if server_url else database_url()
        self.data, self.ref, self.pool_size = data, ref, pool_size
        self.max_sandboxes = max_sandboxes
        self.loop: BackgroundLoop | None = None
        self.snapshot: Any = snapshot
        self._own_snapshot = snapshot is None
        self._pool: Any = None
        self.cache: Any = None

    @property
    def pool(self) -> Any:
        """The sandbox pool for rollouts and cold-start data, started on first use."""
        if self._pool is None:
            from rl.env import SandboxPool

            assert self.loop is not None and self.snapshot is not None
            self._pool = self.loop.run(SandboxPool(self.snapshot, size=self.pool_size,
                                                      max_sandboxes=self.max_sandboxes).start())
        return self._pool

    def release_pool(self) -> None:
        """Drop the pool's sandboxes (and their connections), e.g. while the evaluation harness runs
        its own pool, so the two never hold the server's connections at once."""
        if self._pool is not None:
            assert self.loop is not None
            self.loop.run(self._pool.close())
            self._pool = None

    def __enter__(self) -> ExperimentEnv:
        from rl.env import GoldStateCache, create_snapshot
        from rl.env.ownership import owner_token, sweep_orphan_databases

        self.loop = BackgroundLoop()
        try:
            # databases a killed run left behind (their owner process is gone) are reclaimed first
            self.loop.run(sweep_orphan_databases(self.server_url))
            if self._own_snapshot:
                name = f"paper_{owner_token(self.server_url)}"
                self.snapshot = self.loop.run(create_snapshot(self.server_url, self.data, name=name))
            self.cache = GoldStateCache()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        from rl.env import drop_snapshot

        assert self.loop is not None
        try:
            self.release_pool()
            if self.snapshot is not None and self._own_snapshot:
                self.loop.run(drop_snapshot(self.snapshot))
        finally:
            self.loop.close()

    def run(self, coro: Any) -> Any:
        assert self.loop is not None
        return self.loop.run(coro)
