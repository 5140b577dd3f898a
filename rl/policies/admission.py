"""Episodes let in to run in a fixed order, at most `limit` at once, each one that ends letting the
next in. With a lockstep policy (rl/policies/local.py) an episode joins the policy's roster in the
same step as it is let in, and leaves it as it ends, before any batch can close, so which turns
share a generation batch follows from the episodes alone; a semaphore would let timing pick who
starts when. GRPO rollouts (rl/grpo/rollout.py) and the evaluation harness (rl/eval/harness.py)
both admit their episodes this way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any


def episode_key(task: Any, seed: int) -> str:
    """The name of an episode's conversation (`{task id}#{seed}`): with a local policy, the seed of its
    sampling stream and its place in a lockstep batch."""
    return f"{getattr(task, 'id', task)}#{seed}"


def roster_of(policy: Any) -> Any:
    """The policy's lockstep engine (a `LocalPolicy` with `lockstep`), or None."""
    engine = getattr(policy, "engine", None)
    return engine if getattr(engine, "lockstep", False) else None


class Admission:
    """`keys[i]` names episode i (its `episode_key`); `limit` is
    how many run at once. A lockstep `roster` must not be made to wait on an admitted episode that
    waits on a batch itself (a sandbox held by another admitted episode), so callers keep `limit`
    within what their sandbox pool can give at once."""

    def __init__(self, keys: Sequence[str], limit: int, roster: Any = None) -> None:
        self.keys, self.roster = list(keys), roster
        self._gates = [asyncio.Event() for _ in self.keys]
        self._next = 0
        for _ in range(max(1, limit)):
            self._admit()

    @classmethod
    def for_policy(cls, policy: Any, keys: Sequence[str], concurrency: int, pools: Sequence[Any]) -> Admission:
        """Admission for `policy`'s episodes: on its lockstep roster if it has one, and then no more at
        once than `pools` give sandboxes to (an admitted episode waiting for a sandbox that another
        admitted one holds would hold up every batch)."""
        roster = roster_of(policy)
        cap = pool_cap(*pools) if roster is not None else None
        return cls(keys, min(concurrency, cap or concurrency), roster)

    def _admit(self) -> None:
        if self._next < len(self.keys):
            if self.roster is not None:
                self.roster.join(self.keys[self._next])
            self._gates[self._next].set()
            self._next += 1

    @asynccontextmanager
    async def slot(self, i: int) -> AsyncIterator[None]:
        """Run episode i once it is let in; as it ends, the next one is."""
        await self._gates[i].wait()
        try:
            yield
        finally:
            if self.roster is not None:
                self.roster.leave(self.keys[i])
            self._admit()


def pool_cap(*pools: Any) -> int | None:
    """The fewest sandboxes any of `pools` holds at once (None: no cap known)."""
    caps = [c for c in (getattr(p, "max_sandboxes", None) for p in pools) if c]
    return min(caps) if caps else None
