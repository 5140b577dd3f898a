"""Progress inside a cycle step, written to the cycle's row: a fraction, an estimate of the
seconds left and what the step is doing now.

`CycleReporter` speaks the experiment's `Reporter` protocol (`stage`, `advance`, `lane`), so the
training stages of rl/experiment report into the cycle unchanged. A step made of several stages
(cold-start data, tokenizer, SFT) gives each stage an equal share of the step unless told
otherwise. Writes are throttled (at most one per `every_s`) since GRPO and evaluation advance
many times a second; the estimate is the stage's elapsed time scaled by what is left of it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rl.pipeline.state import CycleDB


class CycleReporter:
    def __init__(self, db: CycleDB, cycle_id: str, *, stages: int = 1, every_s: float = 1.0) -> None:
        self.db, self.cycle_id, self.every_s = db, cycle_id, every_s
        self.stages = max(1, stages)
        self._index = -1  # stages begun so far - 1
        self._name = ""
        self._total: int | None = None
        self._done = 0
        self._t0 = time.monotonic()
        self._last_write = 0.0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the Reporter protocol
    def stage(self, name: str, total: int | None = None) -> None:
        with self._lock:
            self._index = min(self._index + 1, self.stages - 1)
            self._name, self._total, self._done, self._t0 = name, total, 0, time.monotonic()
        self._write(force=True)

    def advance(self, n: int = 1, **info: Any) -> None:
        with self._lock:
            self._done += n
        self._write()

    def lane(self) -> CycleReporter:
        return self

    # ------------------------------------------------------------------ figures
    def fraction(self) -> float:
        """How much of the step is done: finished stages plus the current one's share."""
        inside = min(1.0, self._done / self._total) if self._total else 0.0
        return max(0.0, min(1.0, (max(self._index, 0) + inside) / self.stages))

    def eta_s(self) -> float | None:
        """Seconds left in the current stage (None until it has advanced)."""
        if not self._total or self._done <= 0:
            return None
        elapsed = time.monotonic() - self._t0
        return max(0.0, elapsed / self._done * (self._total - self._done))

    def _write(self, *, force: bool = False) -> None:
        t = time.monotonic()
        if not force and t - self._last_write < self.every_s:
            return
        self._last_write = t
        with self._lock:
            detail = self._name + (f" ({self._done}/{self._total})" if self._total else "")
            fields = {"progress": round(self.fraction(), 4), "eta_s": self.eta_s(), "detail": detail}
        self.db.update(self.cycle_id, **fields)
