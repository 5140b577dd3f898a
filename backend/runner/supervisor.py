"""A small process supervisor: runs a list of named commands as child processes, prefixes
their output with their names, restarts a long-running one that dies (with backoff, giving up
on a command that keeps failing at once), and on SIGINT / SIGTERM stops every process it
started, grandchildren included.

Each child leads its own process group (so a Celery worker's pool processes are stopped with
it) and is asked by the kernel to die with the supervisor (`PR_SET_PDEATHSIG`), so even a
`kill -9` of the supervisor does not leave the services running. Stopping sends SIGTERM to
every group, waits `stop_timeout` seconds, then SIGKILLs whatever is left.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

_PR_SET_PDEATHSIG = 1


@dataclass
class Service:
    """One supervised command. `restart=False` marks a one-shot job (it may finish)."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    restart: bool = True


@dataclass
class _Child:
    service: Service
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    quick_failures: int = 0
    next_start: float = 0.0
    done: bool = False  # finished one-shot, or given up
    readers: list[threading.Thread] = field(default_factory=list)


def _die_with_parent() -> None:
    """Runs in the child before exec: the kernel sends SIGTERM when the supervisor dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the signal handlers still stop the children
        pass


class Supervisor:
    """Runs `services` until a stop signal (or `stop()`), then stops them all."""

    def __init__(self, services: list[Service], *, stop_timeout: float = 15.0, quick_exit_s: float = 10.0,
                 max_quick_failures: int = 5, out: IO[str] | None = None,
                 on_event: Callable[[str, str], None] | None = None) -> None:
        names = [s.name for s in services]
        if len(set(names)) != len(names):
            raise ValueError(f"service names must be unique: {names}")
        self.children = [_Child(s) for s in services]
        self.stop_timeout = stop_timeout
        self.quick_exit_s = quick_exit_s
        self.max_quick_failures = max_quick_failures
        self.out = out or sys.stdout
        self.on_event = on_event
        self._stopping = threading.Event()
        self._write_lock = threading.Lock()
        self._width = max((len(n) for n in names), default=0)

    # -- output --------------------------------------------------------------------------

    def say(self, name: str, line: str) -> None:
        with self._write_lock:
            self.out.write(f"{name.ljust(self._width)} | {line}\n")
            self.out.flush()

    def _event(self, name: str, what: str) -> None:
        self.say(name, what)
        if self.on_event is not None:
            self.on_event(name, what)

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self.say(name, raw.decode(errors="replace").rstrip("\n"))
        stream.close()

    # -- lifecycle -----------------------------------------------------------------------

    def _spawn(self, child: _Child) -> None:
        s = child.service
        env = os.environ | s.env
        child.process = subprocess.Popen(
            s.argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent,
        )
        child.started_at = time.monotonic()
        assert child.process.stdout is not None
        reader = threading.Thread(target=self._pump, args=(s.name, child.process.stdout), daemon=True)
        reader.start()
        child.readers = [reader]

    def start(self) -> None:
        for child in self.children:
            self._spawn(child)

    def stop(self) -> None:
        """Ask `run()` to stop everything (safe from a signal handler or another thread)."""
        self._stopping.set()

    @property
    def pids(self) -> list[int]:
        return [c.process.pid for c in self.children if c.process is not None and c.process.poll() is None]

    def _check(self, child: _Child) -> None:
        p = child.process
        if child.done or p is None:
            if not child.done and time.monotonic() >= child.next_start:
                self._spawn(child)
            return
        code = p.poll()
        if code is None:
            return
        _kill_group(p.pid, signal.SIGKILL)  # anything it left behind in its group
        child.process = None
        name = child.service.name
        if not child.service.restart:
            child.done = True
            self._event(name, f"finished (exit code {code})")
            return
        quick = time.monotonic() - child.started_at < self.quick_exit_s
        child.quick_failures = child.quick_failures + 1 if quick else 0
        if child.quick_failures >= self.max_quick_failures:
            child.done = True
            self._event(name, f"exited with code {code} {child.quick_failures} times in a row; not restarting it")
            return
        delay = min(30.0, 2.0 ** child.quick_failures)
        child.next_start = time.monotonic() + delay
        self._event(name, f"exited with code {code}; restarting in {delay:.0f} s")

    def run(self, *, install_signals: bool = True) -> int:
        """Start everything, watch until told to stop, stop everything. Returns 0."""
        if install_signals:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, lambda *_: self.stop())
        try:
            self.start()
            while not self._stopping.wait(0.2):
                for child in self.children:
                    self._check(child)
        finally:
            self.shutdown()
        return 0

    def shutdown(self) -> None:
        """SIGTERM every child's process group, wait, SIGKILL what is left, reap everything."""
        running = [c for c in self.children if c.process is not None]
        for c in running:
            assert c.process is not None
            _kill_group(c.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        for c in running:
            assert c.process is not None
            while time.monotonic() < deadline and (c.process.poll() is None or _group_alive(c.process.pid)):
                time.sleep(0.05)
        for c in running:
            assert c.process is not None
            if c.process.poll() is None or _group_alive(c.process.pid):
                self.say(c.service.name, f"did not stop within {self.stop_timeout:.0f} s; killing it")
                _kill_group(c.process.pid, signal.SIGKILL)
            c.process.wait()
            for r in c.readers:
                r.join(timeout=1.0)
            c.process = None


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    """True while a process other than an unreaped leader is in the group."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # the leader may be a zombie we have not reaped yet: look for live members
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry.name}/stat").read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return not os.path.isdir("/proc")
