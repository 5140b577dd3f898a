"""Ordered admission: episodes start in their given order, at most `limit` at once, each one that
ends letting the next in, and a lockstep roster hears of both in the same step."""

import asyncio
import random

import pytest

from rl.policies.admission import Admission, episode_key, pool_cap


class _Roster:
    lockstep = True

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def join(self, key: str) -> None:
        self.events.append(("join", key))

    def leave(self, key: str) -> None:
        self.events.append(("leave", key))


def test_episodes_start_in_order_within_the_limit_whatever_their_timing():
    keys = [f"t{i}" for i in range(6)]

    async def run(timing: int) -> tuple[list[str], int, list[tuple[str, str]]]:
        roster, rng, started, running, most = _Roster(), random.Random(timing), [], 0, 0
        admission = Admission(keys, 2, roster)
        # the first two joined the roster before any episode ran
        assert roster.events == [("join", "t0"), ("join", "t1")]

        async def one(i: int) -> None:
            nonlocal running, most
            await asyncio.sleep(rng.random() * 0.02)  # reach the door at any time
            async with admission.slot(i):
                started.append(keys[i])
                running += 1
                most = max(most, running)
                await asyncio.sleep(rng.random() * 0.02)
                running -= 1

        await asyncio.gather(*(one(i) for i in reversed(range(6))))
        return started, most, roster.events

    for timing in (1, 2, 3):
        started, most, events = asyncio.run(run(timing))
        assert most <= 2 and sorted(started) == keys
        joins = [k for e, k in events if e == "join"]
        assert joins == keys  # let in in their order, whoever reached the door first
        # each one joins only after an earlier one left (two at a time)
        for n, (e, k) in enumerate(events):
            if e == "join" and k not in ("t0", "t1"):
                assert events[n - 1][0] == "leave"


def test_an_episode_that_fails_still_lets_the_next_in():
    async def run() -> list[tuple[str, str]]:
        roster = _Roster()
        admission = Admission(["a", "b"], 1, roster)

        async def fails() -> None:
            async with admission.slot(0):
                raise RuntimeError("no sandbox")

        async def runs() -> None:
            async with admission.slot(1):
                pass

        with pytest.raises(RuntimeError):
            await asyncio.gather(fails(), runs())
        await asyncio.sleep(0.01)
        return roster.events

    assert asyncio.run(run()) == [("join", "a"), ("leave", "a"), ("join", "b"), ("leave", "b")]


def test_keys_and_pool_caps():
    class Task:
        id = "retail-7"

    class Pool:
        def __init__(self, cap):
            self.max_sandboxes = cap

    assert episode_key(Task(), 3) == "retail-7#3" and episode_key("x", 0) == "x#0"
    assert pool_cap(Pool(80), Pool(16)) == 16 and pool_cap(Pool(None), object()) is None
