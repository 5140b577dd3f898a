"""Sandboxes: private writable copies of a snapshot, one per episode, handed out by a pool.

A `Sandbox` is a database made with `CREATE DATABASE .. TEMPLATE <snapshot>` and one open
`AsyncConnection` to it (`sandbox.conn`, outside any transaction; tools open their own), so an
episode can call tools at once. Sandboxes are disposable, so their sessions run with
`synchronous_commit = off` (a crash loses at most the last few episode writes, never the
snapshot or the live store).

`SandboxPool` keeps `size` sandboxes ready: `acquire()` pops a ready one (a list pop, well under
a millisecond) and wakes a background task that copies a replacement; when none is ready it
makes one on demand. `release()` closes the connection and drops the database in the
background (`DROP DATABASE .. WITH (FORCE)`). The pool never holds more sandboxes at once than
the server's connection limit allows (ready + in use + being made <= `max_sandboxes`; acquire
waits for a release beyond that), and `close()` drops everything it made.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from backend.db.engine import admin_connection, admin_url, check_db_name, with_database
from backend.tools.context import Principal, ToolContext
from rl.env.changes import Changes, changed_records, is_pristine
from rl.env.ownership import owner_token
from rl.env.snapshot import Snapshot
from rl.env.warmup import warm_up

log = structlog.get_logger(__name__)

Strategy = Literal["wal_log", "file_copy"]
# WAL_LOG copies and drops a small snapshot about 3x faster than FILE_COPY, which forces two
# checkpoints per copy (bench/RESULTS.md).
DEFAULT_STRATEGY: Strategy = "wal_log"
CLOSE_DROPS = 4  # admin connections dropping databases at once when a pool closes
SANDBOX_SESSION_SETTINGS = {"synchronous_commit": "off", "jit": "off"}
# Server connections left to clients other than sandbox pools (the service, psql, tests).
OTHER_CLIENTS = 12
DEFAULT_POOL_WORKERS = 2  # a pool's refill workers; it holds one admin connection more than that


async def free_connections(admin: AsyncConnection) -> int:
    """The server connections sandbox pools may share: `max_connections` less the superuser
    reserve, `OTHER_CLIENTS` and the client connections other sessions hold now. The server is
    shared (a test run beside a long experiment, the service beside both), so a budget from
    `max_connections` alone would let a newcomer ask for connections another process holds."""
    limit = int(await admin.scalar(text("SHOW max_connections")))
    reserved = int(await admin.scalar(text("SHOW superuser_reserved_connections")))
    in_use = int(await admin.scalar(text(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")))
    return max(0, limit - reserved - OTHER_CLIENTS - in_use)


def sandbox_budget(free: int, *, pools: int = 1, workers: int = DEFAULT_POOL_WORKERS) -> int:
    """Sandboxes (one connection each) each of `pools` pools with `workers` refill workers may hold
    so that all of them, admin connections included, stay within `free` connections (at least 1)."""
    return max(1, free // pools - (workers + 1))


async def sandbox_share(server_url: str, pools: int) -> int:
    """`sandbox_budget` for `pools` default pools on the server at `server_url`, e.g. one per
    process when several environments run side by side."""
    async with admin_connection(server_url) as admin:
        return sandbox_budget(await free_connections(admin), pools=pools)


@dataclass(eq=False)
class Sandbox:
    """A private copy of `snapshot` with an open connection (`conn`, no transaction open)."""

    name: str
    url: str
    snapshot: Snapshot
    engine: AsyncEngine = field(repr=False)
    conn: AsyncConnection = field(repr=False)
    pool: SandboxPool | None = field(default=None, repr=False)
    created_ms: float = 0.0

    def tool_context(self, principal: Principal | None = None, *, upstream_compat: bool = False) -> ToolContext:
        """A ToolContext on this sandbox (staff unless a principal is given)."""
        return ToolContext(self.conn, principal or Principal.staff(), upstream_compat=upstream_compat)

    @contextlib.asynccontextmanager
    async def rolled_back(self) -> AsyncIterator[Sandbox]:
        """Run a block in one transaction that is rolled back afterwards (tools use savepoints
        inside it). Change tracking is transactional, so the sandbox is then exactly as fresh as
        a new copy, and the pool hands it out again instead of copying a new database."""
        tx = await self.conn.begin()
        try:
            yield self
        finally:
            try:
                await tx.rollback()
            except Exception:  # a broken connection: `is_pristine` fails and the pool drops the copy
                log.warning("sandbox.rollback_failed", name=self.name)

    async def is_pristine(self) -> bool:
        """Nothing committed since the snapshot (and no transaction left open)."""
        if self.conn.in_transaction():
            return False
        try:
            return await is_pristine(self.conn)
        finally:
            await self.conn.rollback()

    async def changed_records(self) -> Changes:
        """Records that differ from the snapshot (see `rl.env.changes.changed_records`)."""
        return await changed_records(self.conn, self.snapshot)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.conn.close()
        with contextlib.suppress(Exception):
            await self.engine.dispose()


def _admin_engine(server_url: str) -> AsyncEngine:
    return create_async_engine(admin_url(server_url), poolclass=NullPool, isolation_level="AUTOCOMMIT")


async def create_sandbox(admin: AsyncConnection, snapshot: Snapshot, name: str, *,
                         strategy: Strategy = DEFAULT_STRATEGY, pool: SandboxPool | None = None) -> Sandbox:
    """Copy `snapshot` into database `name` (via the autocommit `admin` connection) and connect."""
    start = time.perf_counter()
    await admin.execute(text(
        f'CREATE DATABASE "{name}" TEMPLATE "{snapshot.name}" STRATEGY {strategy.upper()}'
    ))
    url = with_database(snapshot.server_url, name)
    engine = create_async_engine(url, poolclass=NullPool,
                                 connect_args={"server_settings": SANDBOX_SESSION_SETTINGS})
    try:
        conn = await engine.connect()
    except BaseException:
        await engine.dispose()
        await admin.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        raise
    return Sandbox(name, url, snapshot, engine, conn, pool, (time.perf_counter() - start) * 1000)


class SandboxPool:
    """Ready-made sandboxes of one snapshot, refilled in the background."""

    def __init__(self, snapshot: Snapshot, size: int = 8, *, max_sandboxes: int | None = None,
                 workers: int = DEFAULT_POOL_WORKERS, strategy: Strategy = DEFAULT_STRATEGY, warm: bool = True) -> None:
        if size < 0 or workers < 1:
            raise ValueError("size must be >= 0 and workers >= 1")
        self.snapshot = snapshot
        self.size = size
        self.workers = workers
        self.strategy: Strategy = strategy
        self.max_sandboxes = max_sandboxes
        self.warm = warm
        self._id = uuid.uuid4().hex[:6]
        self._owner_token: str | None = None
        self._n = 0
        self._ready: list[Sandbox] = []
        self._in_use: set[Sandbox] = set()
        self._creating = 0
        self._closing = 0  # given back, their connection not yet recycled into the ready list or closed
        self._made: set[str] = set()  # every database this pool created and has not dropped
        self._admin_engine: AsyncEngine | None = None
        # autocommit connections to the server's maintenance db (None: connect on next use)
        self._admins: asyncio.Queue[AsyncConnection | None] = asyncio.Queue()
        self._changed = asyncio.Condition()
        self.recycled = 0  # sandboxes handed back unchanged and reused
        self._need = asyncio.Event()
        self._refill_task: asyncio.Task | None = None
        self._drops: set[asyncio.Task] = set()
        self._closed = False
        self.last_error: BaseException | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self, *, wait: bool = True) -> SandboxPool:
        """Open admin connections, start refilling; with `wait`, return once `size` are ready.
        Interrupted (cancelled, Ctrl-C) before it returns, it closes the pool first: the caller has
        no pool to close yet, and the refill would otherwise leave its copies behind."""
        self._admin_engine = _admin_engine(self.snapshot.server_url)
        for _ in range(self.workers + 1):
            self._admins.put_nowait(None)  # connected on first use
        try:
            if self.max_sandboxes is None:
                self.max_sandboxes = await self._connection_budget()
            self.size = min(self.size, self.max_sandboxes)
            self._refill_task = asyncio.create_task(self._refill_loop(), name=f"sandbox-refill-{self._id}")
            self._need.set()
            if wait:
                async with self._changed:
                    await self._changed.wait_for(lambda: len(self._ready) >= self.size or self.last_error)
        except BaseException:
            await asyncio.shield(self.close())
            raise
        if wait and self.last_error is not None and not self._ready and self.size:
            err = self.last_error
            await self.close()
            raise err
        return self

    async def __aenter__(self) -> SandboxPool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop refilling and drop every database this pool made (in use ones included)."""
        if self._closed:
            return
        self._closed = True
        if self._refill_task is not None:
            self._refill_task.cancel()
            with contextlib.suppress(BaseException):
                await self._refill_task
        while self._drops:
            await asyncio.gather(*list(self._drops), return_exceptions=True)
        for sb in [*self._ready, *self._in_use]:
            await sb.close()
        self._ready.clear()
        self._in_use.clear()
        if self._admin_engine is not None:
            names = sorted(self._made)
            # dropped a few at a time: a drop mostly waits on the server (every backend must answer
            # its barrier), and waits overlap
            await asyncio.gather(*(self._drop_names(names[i::CLOSE_DROPS]) for i in range(CLOSE_DROPS)))
            self._made.clear()
            while not self._admins.empty():
                admin = self._admins.get_nowait()
                if admin is not None:
                    with contextlib.suppress(Exception):
                        await admin.close()
            await self._admin_engine.dispose()

    async def _drop_names(self, names: list[str]) -> None:
        if not names:
            return
        assert self._admin_engine is not None
        async with self._admin_engine.connect() as admin:
            for name in names:
                try:
                    await admin.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                except Exception:
                    log.exception("sandbox.drop_failed", name=name)

    # ------------------------------------------------------------------ handing out

    async def acquire(self) -> Sandbox:
        """A fresh sandbox: a ready one when available, else one made now."""
        if self._closed or self._refill_task is None:
            raise RuntimeError("sandbox pool is not running (call start())")
        while True:
            if self._ready:
                sb = self._ready.pop()
                self._in_use.add(sb)
                self._need.set()
                return sb
            if self._live < (self.max_sandboxes or 0):
                return await self._make(in_use=True)
            async with self._changed:
                await self._changed.wait_for(lambda: bool(self._ready) or self._live < (self.max_sandboxes or 0))

    async def release(self, sandbox: Sandbox) -> None:
        """Give a sandbox back. One that holds no write since the snapshot (its block ran in
        `Sandbox.rolled_back()`, or it only read) goes back to the ready list; any other is
        dropped in the background."""
        if sandbox not in self._in_use:
            return
        self._in_use.discard(sandbox)
        self._closing += 1  # it holds its connection until recycled or closed: still counted
        pristine = False
        try:
            if not self._closed:
                with contextlib.suppress(Exception):
                    pristine = await sandbox.is_pristine()
        except BaseException:
            self._closing -= 1
            raise
        if pristine and not self._closed:
            self._closing -= 1
            self.recycled += 1
            self._ready.append(sandbox)
            async with self._changed:
                self._changed.notify_all()
            return
        self._track(asyncio.create_task(self._drop(sandbox, closing=True)))

    @contextlib.asynccontextmanager
    async def sandbox(self) -> AsyncIterator[Sandbox]:
        sb = await self.acquire()
        try:
            yield sb
        finally:
            await self.release(sb)

    @property
    def ready(self) -> int:
        return len(self._ready)

    @property
    def in_use(self) -> int:
        return len(self._in_use)

    @property
    def connections(self) -> int:
        """Sandbox connections the pool holds now: ready, in use, being made, or given back and not
        yet recycled or closed; never more than `max_sandboxes`."""
        return self._live

    @property
    def databases(self) -> set[str]:
        """Names of the databases this pool made that still exist (or are being dropped)."""
        return set(self._made)

    # ------------------------------------------------------------------ internals

    @property
    def _live(self) -> int:
        # a sandbox being dropped holds its connection until it is closed: counted until then, or
        # the pool would make a new one while the old connection is still open and overrun its share
        return len(self._ready) + len(self._in_use) + self._creating + self._closing

    @contextlib.asynccontextmanager
    async def _admin(self) -> AsyncIterator[AsyncConnection]:
        """One of the pool's admin connections; one that fails (or is cancelled mid-statement)
        is closed in the background and replaced by a fresh one on next use."""
        conn = await self._admins.get()
        try:
            if conn is None:
                assert self._admin_engine is not None
                conn = await self._admin_engine.connect()
            yield conn
        except BaseException:
            if conn is not None:
                self._track(asyncio.create_task(conn.close()))
            conn = None
            raise
        finally:
            self._admins.put_nowait(conn)

    def _track(self, task: asyncio.Task) -> None:
        self._drops.add(task)
        task.add_done_callback(self._drops.discard)

    async def _connection_budget(self) -> int:
        async with self._admin() as admin:
            return sandbox_budget(await free_connections(admin), workers=self.workers)

    @property
    def name_prefix(self) -> str:
        """Every database this pool makes is named `<prefix><n>`; the prefix ends with this process's
        owner token (rl/env/ownership.py), so a sweep drops the copies of a process that died."""
        if self._owner_token is None:
            self._owner_token = owner_token(self.snapshot.server_url)
        return f"{self.snapshot.name}_{self._owner_token}_"

    def _next_name(self) -> str:
        self._n += 1
        return check_db_name(f"{self.name_prefix}{self._n}")

    async def _make(self, *, in_use: bool) -> Sandbox:
        self._creating += 1
        name = self._next_name()
        try:
            async with self._admin() as admin:
                # noted before the copy: a copy cancelled half-way may still exist; close() drops it
                self._made.add(name)
                sb = await create_sandbox(admin, self.snapshot, name, strategy=self.strategy, pool=self)
            if self.warm and not in_use:
                await warm_up(sb)
        finally:
            self._creating -= 1
        if self._closed:
            await self._drop(sb)
            raise RuntimeError("sandbox pool closed")
        if in_use:
            self._in_use.add(sb)
        else:
            self._ready.append(sb)
        async with self._changed:
            self._changed.notify_all()
        return sb

    async def _refill_loop(self) -> None:
        backoff = 0.05
        while not self._closed:
            await self._need.wait()
            self._need.clear()
            while not self._closed:
                deficit = self.size - len(self._ready) - self._creating
                room = (self.max_sandboxes or 0) - self._live
                n = min(deficit, room, self.workers)
                if n <= 0:
                    break
                results = await asyncio.gather(*(self._make(in_use=False) for _ in range(n)),
                                               return_exceptions=True)
                errors = [r for r in results if isinstance(r, BaseException)]
                if errors:
                    self.last_error = errors[0]
                    log.warning("sandbox.refill_failed", error=str(errors[0]))
                    async with self._changed:
                        self._changed.notify_all()
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 2.0)
                else:
                    backoff = 0.05

    async def _drop(self, sandbox: Sandbox, *, closing: bool = False) -> None:
        try:
            await sandbox.close()
        finally:
            if closing:
                self._closing -= 1
        try:
            async with self._admin() as admin:
                await admin.execute(text(f'DROP DATABASE IF EXISTS "{sandbox.name}" WITH (FORCE)'))
            self._made.discard(sandbox.name)
        except Exception as e:  # close() tries again
            log.warning("sandbox.drop_failed", name=sandbox.name, error=str(e))
        async with self._changed:
            self._changed.notify_all()
        self._need.set()


@contextlib.asynccontextmanager
async def temporary_sandbox(snapshot: Snapshot, *, strategy: Strategy = DEFAULT_STRATEGY) -> AsyncIterator[Sandbox]:
    """A one-off sandbox outside any pool, dropped on exit (for occasional use, e.g. a gold replay)."""
    engine = _admin_engine(snapshot.server_url)
    try:
        async with engine.connect() as admin:
            name = check_db_name(f"{snapshot.name}_{owner_token(snapshot.server_url)}")
            try:
                sb = await create_sandbox(admin, snapshot, name, strategy=strategy)
                try:
                    yield sb
                finally:
                    await sb.close()
            finally:
                await admin.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await engine.dispose()
