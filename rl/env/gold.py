"""Gold replay: the store state a task's gold actions reach from a snapshot, cached.

A task's gold actions (`[{"name", "kwargs"}]`) are replayed through the production tool
registry (`backend.tools.registry.RETAIL.call`) as staff on a fresh sandbox of the snapshot, in
order. Failing actions are tolerated (their error text is kept, nothing is written), and terminal
tools such as `transfer_to_human_agents` are not replayed, as in tau-bench's reward. The result is
the sandbox's change set (`changed_records`). `GoldStateCache` keeps it per (task key, actions,
snapshot, compatibility flag), so the G rollouts of a GRPO group pay for one replay; concurrent
requests for the same entry share one replay.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from backend.tools.registry import RETAIL, ToolResult
from rl.env.changes import Changes
from rl.env.sandbox import Sandbox, SandboxPool, temporary_sandbox
from rl.env.snapshot import Snapshot


def ensure_tools_registered() -> None:
    try:
        import backend.tools.retail  # noqa: F401  (registers the retail tools on RETAIL)
    except ModuleNotFoundError as e:
        if e.name != "backend.tools.retail":
            raise


@dataclass(frozen=True, eq=False)
class GoldSpec:
    """What a task says a perfect agent does: its gold actions and the outputs it must state."""

    key: str
    actions: list[dict[str, Any]]
    outputs: list[str] = field(default_factory=list)

    @classmethod
    def from_tau_task(cls, key: str, task: dict[str, Any]) -> GoldSpec:
        """From a tau1 task (`{user_id, instruction, actions: [{name, kwargs}], outputs}`)."""
        return cls(key=key, actions=list(task.get("actions") or []), outputs=list(task.get("outputs") or []))

    @property
    def actions_digest(self) -> str:
        raw = json.dumps(self.actions, sort_keys=True, ensure_ascii=True, default=str)
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


async def replay_actions(sandbox: Sandbox, actions: list[dict[str, Any]], *, upstream_compat: bool,
                         skip_terminal: bool = True) -> list[ToolResult | None]:
    """Run `actions` in order on `sandbox` as staff. One result per action; None where a terminal
    action was skipped. Never raises for a bad action (the registry turns it into `Error: ...`)."""
    ensure_tools_registered()
    ctx = sandbox.tool_context(upstream_compat=upstream_compat)
    terminal = RETAIL.terminal_names()
    results: list[ToolResult | None] = []
    for action in actions:
        name = action.get("name") if isinstance(action, dict) else None
        if skip_terminal and name in terminal:
            results.append(None)
            continue
        kwargs = action.get("kwargs", action.get("arguments", {})) if isinstance(action, dict) else None
        results.append(await RETAIL.call(ctx, name if isinstance(name, str) else str(name), kwargs))
    return results


async def replay_gold(sandbox: Sandbox, gold: GoldSpec, *, upstream_compat: bool) -> Changes:
    """Replay `gold` on a fresh `sandbox` and return its change set; the replay is rolled back,
    so the sandbox stays fresh (and reusable)."""
    async with sandbox.rolled_back():
        await replay_actions(sandbox, gold.actions, upstream_compat=upstream_compat)
        return await sandbox.changed_records()


class GoldStateCache:
    """Gold change sets per (task key, actions digest, snapshot name, compat flag), in memory."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str, bool], asyncio.Future[Changes]] = {}
        self.replays = 0  # how many gold replays actually ran (for tests and stats)

    def _key(self, gold: GoldSpec, snapshot: Snapshot, upstream_compat: bool) -> tuple[str, str, str, bool]:
        return (gold.key, gold.actions_digest, snapshot.name, bool(upstream_compat))

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def has(self, gold: GoldSpec, snapshot: Snapshot, *, upstream_compat: bool) -> bool:
        """Whether `gold`'s change set is cached (or being replayed) for `snapshot`."""
        return self._key(gold, snapshot, upstream_compat) in self._entries

    def put(self, gold: GoldSpec, snapshot: Snapshot, changes: Changes, *, upstream_compat: bool) -> None:
        """Seed an entry with a change set computed elsewhere (e.g. a replay already done)."""
        fut: asyncio.Future[Changes] = asyncio.get_running_loop().create_future()
        fut.set_result(changes)
        self._entries[self._key(gold, snapshot, upstream_compat)] = fut

    async def get(self, gold: GoldSpec, snapshot: Snapshot, *, upstream_compat: bool,
                  pool: SandboxPool | None = None) -> Changes:
        """The gold change set, replaying once on a fresh sandbox (from `pool` if it copies
        `snapshot`, else a temporary one) when it is not cached yet."""
        key = self._key(gold, snapshot, upstream_compat)
        while (fut := self._entries.get(key)) is not None:
            try:
                return await asyncio.shield(fut)
            except asyncio.CancelledError:
                if not fut.cancelled():
                    raise  # we were cancelled ourselves
                # the replaying task was cancelled: try again (it removed the entry)
        fut = asyncio.get_running_loop().create_future()
        self._entries[key] = fut
        try:
            self.replays += 1
            if pool is not None and pool.snapshot is snapshot:
                async with pool.sandbox() as sb:
                    changes = await replay_gold(sb, gold, upstream_compat=upstream_compat)
            else:
                async with temporary_sandbox(snapshot) as sb:
                    changes = await replay_gold(sb, gold, upstream_compat=upstream_compat)
        except BaseException as e:
            del self._entries[key]
            if isinstance(e, asyncio.CancelledError):
                fut.cancel()
            else:
                fut.set_exception(e)
                fut.exception()  # mark retrieved: waiters see it, nobody else has to
            raise
        fut.set_result(changes)
        return changes
