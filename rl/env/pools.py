"""Sandbox pools over store snapshots, set up one way for every caller (the evaluation harness, gold
verification, the experiment): per store reference, the caller's snapshot or a new one built from
that store's data and dropped at close, and a pool on it started on first use."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from backend.store.tau_data import StoreData
from rl.env.ownership import owner_token
from rl.env.sandbox import SandboxPool
from rl.env.snapshot import Snapshot, create_snapshot, drop_snapshot


def server_url_or_default(server_url: str | None) -> str:
    """`server_url` as an asyncpg URL, or the configured database's server when None."""
    from backend.db.engine import database_url, normalize_url

    return normalize_url(server_url) if server_url else database_url()


class StorePools:
    """Snapshots and sandbox pools by store reference (`tau-retail`, `synthetic:<seed>:<users>`).

    `snapshots` are the caller's and outlive this object; those it makes (from `data[ref]`, else
    `rl.tasks.stores.resolve_store(ref, data_dir)`) are dropped by `close()`, as are all pools.
    Each pool keeps `size` sandboxes ready and holds at most `max_sandboxes` (None: what the
    server allows, rl/env/sandbox.py `sandbox_budget`)."""

    def __init__(self, server_url: str | None = None, *, size: int = 8, max_sandboxes: int | None = None,
                 snapshots: dict[str, Snapshot] | None = None, data: dict[str, StoreData] | None = None,
                 data_dir: Path | None = None, name_prefix: str | None = None) -> None:
        self.server_url = server_url_or_default(server_url)
        self.size, self.max_sandboxes = size, max_sandboxes
        self.data, self.data_dir, self.name_prefix = dict(data or {}), data_dir, name_prefix
        self._snapshots: dict[str, Snapshot] = dict(snapshots or {})
        self._made: list[Snapshot] = []
        self._pools: dict[str, SandboxPool] = {}

    async def snapshot(self, ref: str) -> Snapshot:
        """The snapshot of store `ref`, made on first use unless the caller gave one."""
        snap = self._snapshots.get(ref)
        if snap is None:
            data = self.data.get(ref)
            if data is None:
                from rl.tasks.stores import resolve_store

                data = resolve_store(ref, self.data_dir)
            # the owner token lets the orphan sweep (rl/env/ownership.py) drop it if this process dies
            name = f"{self.name_prefix}{owner_token(self.server_url)}" if self.name_prefix else None
            snap = await create_snapshot(self.server_url, data, name=name)
            self._made.append(snap)
            self._snapshots[ref] = snap
        return snap

    async def pool(self, ref: str) -> SandboxPool:
        """The started sandbox pool of store `ref` (its snapshot made first when needed)."""
        pool = self._pools.get(ref)
        if pool is None:
            snap = await self.snapshot(ref)
            pool = await SandboxPool(snap, size=self.size, max_sandboxes=self.max_sandboxes).start()
            self._pools[ref] = pool
        return pool

    async def release(self) -> None:
        """Close every pool (their sandboxes and connections), keeping the snapshots: the next
        `pool(ref)` starts a fresh one."""
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.close()

    async def close(self) -> None:
        """Close every pool and drop the snapshots this object made."""
        try:
            await self.release()
        finally:
            made, self._made = self._made, []
            for snap in made:
                self._snapshots = {r: s for r, s in self._snapshots.items() if s is not snap}
                await drop_snapshot(snap)

    async def __aenter__(self) -> StorePools:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()
