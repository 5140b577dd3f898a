"""The supervisor on real process trees: a signal stops every process it started (grandchildren
and a child that ignores SIGTERM included), a dying service is restarted, one that keeps failing
at once is given up, a one-shot job may finish, and a `kill -9` of the supervisor takes its
children with it."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from backend.runner.supervisor import Service, Supervisor

ROOT = Path(__file__).resolve().parents[3]

IGNORES_TERM = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
                "time.sleep(300)")

SCRIPT = textwrap.dedent(f"""
    import sys
    from backend.runner.supervisor import Service, Supervisor
    services = [
        Service("tree", ["sh", "-c", "sleep 300 & sleep 300 & wait"]),
        Service("stubborn", [sys.executable, "-c", {IGNORES_TERM!r}]),
        Service("plain", ["sleep", "300"]),
    ]
    sys.exit(Supervisor(services, stop_timeout=3.0).run())
""")


def _descendants(pid: int, expected: int, timeout: float = 20.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = psutil.Process(pid).children(recursive=True)
        if len(procs) >= expected:
            return procs
        time.sleep(0.1)
    raise AssertionError(f"only {len(psutil.Process(pid).children(recursive=True))} of {expected} processes started")


def _gone(procs: list[psutil.Process], timeout: float = 10.0) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def _start_supervisor() -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=os.environ | {"PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_every_process_it_started(sig: signal.Signals) -> None:
    sup = _start_supervisor()
    try:
        # sh + its two sleeps, the stubborn python, the plain sleep
        procs = _descendants(sup.pid, expected=5)
        time.sleep(0.5)  # the stubborn child has installed its handler
        sup.send_signal(sig)
        out, _ = sup.communicate(timeout=30)
        assert sup.returncode == 0, out
        assert _gone(procs) == [], f"left running: {procs}\n{out}"
        assert "stubborn | did not stop within 3 s; killing it" in out
    finally:
        if sup.poll() is None:
            sup.kill()


def test_kill_9_of_the_supervisor_takes_its_children_with_it() -> None:
    script = textwrap.dedent("""
        import sys
        from backend.runner.supervisor import Service, Supervisor
        Supervisor([Service("a", ["sleep", "300"]), Service("b", ["sleep", "301"])]).run()
    """)
    sup = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)})
    procs = _descendants(sup.pid, expected=2)
    sup.kill()
    sup.wait(timeout=10)
    assert _gone(procs) == []


def _run_in_thread(sup: Supervisor) -> threading.Thread:
    t = threading.Thread(target=sup.run, kwargs={"install_signals": False}, daemon=True)
    t.start()
    return t


def test_restarts_a_dead_service_gives_up_on_a_crash_loop_and_lets_a_one_shot_finish(tmp_path: Path) -> None:
    marker = tmp_path / "starts"
    out = io.StringIO()
    sup = Supervisor([
        # dies after a moment, not at once: restarted every time
        Service("flaky", ["sh", "-c", f"echo start >> {marker}; sleep 1.5; exit 3"]),
        Service("broken", ["sh", "-c", "echo nope; exit 2"]),
        Service("job", ["sh", "-c", "echo done"], restart=False),
    ], quick_exit_s=1.0, max_quick_failures=2, out=out)
    t = _run_in_thread(sup)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not marker.exists() or len(marker.read_text().split()) < 3):
        time.sleep(0.1)
    time.sleep(1.0)  # `broken` needs two quick failures (2 s backoff between them)
    sup.stop()
    t.join(timeout=20)
    text = out.getvalue()
    assert len(marker.read_text().split()) >= 3, text
    assert "flaky  | exited with code 3; restarting" in text
    assert "broken | exited with code 2 2 times in a row; not restarting it" in text
    assert "job    | done" in text and "job    | finished (exit code 0)" in text
    assert sup.pids == []


def test_names_must_be_unique() -> None:
    with pytest.raises(ValueError, match="unique"):
        Supervisor([Service("a", ["true"]), Service("a", ["true"])])
