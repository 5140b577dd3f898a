"""The background loop the synchronous trainers run episodes on: an interrupted wait (Ctrl-C, or
SIGTERM turned into SystemExit) cancels the coroutine and lets its clean-up finish first, so a killed
experiment drops its sandboxes instead of leaving them on the server."""

import asyncio
import signal

import pytest

from rl.grpo.rollout import BackgroundLoop


class Interrupted(Exception):
    pass


def _interrupt(*_):
    raise Interrupted


def test_an_interrupted_run_cancels_the_coroutine_and_waits_for_its_cleanup():
    loop = BackgroundLoop()
    events = []

    async def work():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        finally:
            await asyncio.sleep(0.2)  # e.g. closing a sandbox pool
            events.append("cleaned up")

    old = signal.signal(signal.SIGALRM, _interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(Interrupted):
            loop.run(work())
        assert events == ["cancelled", "cleaned up"]  # before the interruption went on
        assert loop.run(asyncio.sleep(0, result=7)) == 7  # the loop still works
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        loop.close()
