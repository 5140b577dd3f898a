"""The worker's view of a cycle's row: a plain (synchronous) psycopg connection that also holds
the cycle's advisory lock while a step runs.

Only the process running a step holds `(CYCLE_LOCK_CLASS, hashtext(cycle id))`; a second
delivery of the same step (a redelivered message, a duplicate chain) finds it taken and skips.
The lock lives on the connection, so it disappears with the process that held it however it
died: a free lock on a running cycle means its step's runner is gone (see `recovery.py`).
Progress updates go through the same connection (throttled by the reporter), from any thread.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from sqlalchemy import make_url

from backend.db.engine import normalize_url

CYCLE_LOCK_CLASS = 0x6D76
_JSON = {"overrides", "outputs", "attempts", "events", "gate_report"}


def libpq_url(url: str) -> str:
    """The libpq form of a (SQLAlchemy / asyncpg) database URL."""
    return make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class CycleDB:
    """Reads and writes rows of `cycles`; holds at most one cycle lock at a time."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(libpq_url(url), autocommit=True, row_factory=dict_row,
                                    application_name="muarl-cycle")
        self._mutex = threading.Lock()  # the reporter may write from the event-loop thread

    def close(self) -> None:
        self.conn.close()  # ends the session: its advisory locks go with it

    def __enter__(self) -> CycleDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _exec(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        with self._mutex:
            cur = self.conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    # ------------------------------------------------------------------ locks
    def try_lock(self, cycle_id: str, wait_s: float = 0.0) -> bool:
        """Take the cycle's lock; with `wait_s`, keep trying that long (a recovery pass holds it briefly)."""
        deadline = time.monotonic() + wait_s
        while True:
            got = self._exec("SELECT pg_try_advisory_lock(%s, hashtext(%s)) AS ok", (CYCLE_LOCK_CLASS, cycle_id))
            if got[0]["ok"]:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)

    def unlock(self, cycle_id: str) -> None:
        self._exec("SELECT pg_advisory_unlock(%s, hashtext(%s))", (CYCLE_LOCK_CLASS, cycle_id))

    # ------------------------------------------------------------------ rows
    def get(self, cycle_id: str) -> dict[str, Any] | None:
        rows = self._exec("SELECT * FROM cycles WHERE id = %s", (cycle_id,))
        return rows[0] if rows else None

    def active(self) -> dict[str, Any] | None:
        rows = self._exec("SELECT * FROM cycles WHERE status IN ('queued', 'running')")
        return rows[0] if rows else None

    def active_ids(self) -> set[str]:
        return {r["id"] for r in self._exec("SELECT id FROM cycles WHERE status IN ('queued', 'running')")}

    def finished_ids(self, ids: list[str]) -> set[str]:
        """Those of `ids` that are cycles of this database that ended (succeeded or failed)."""
        if not ids:
            return set()
        rows = self._exec("SELECT id FROM cycles WHERE id = ANY(%s) AND status IN ('succeeded', 'failed')", (ids,))
        return {r["id"] for r in rows}

    def update(self, cycle_id: str, **fields: Any) -> None:
        fields["updated_at"] = now()
        sets = ", ".join(f"{k} = %({k})s" for k in fields)
        params = {k: Jsonb(v) if k in _JSON and v is not None else v for k, v in fields.items()}
        self._exec(f"UPDATE cycles SET {sets} WHERE id = %(_id)s", {**params, "_id": cycle_id})

    def event(self, cycle_id: str, kind: str, **info: Any) -> None:
        """Append an event (what happened, when) to the cycle's log."""
        entry = {"at": now().isoformat(), "event": kind, **info}
        self._exec("UPDATE cycles SET events = events || %s, updated_at = now() WHERE id = %s",
                   (Jsonb([entry]), cycle_id))

    def fail(self, cycle_id: str, reason: str) -> None:
        t = now()
        self._exec("UPDATE cycles SET status = 'failed', error = %s, finished_at = %s, updated_at = %s, "
                   "dispatched_at = NULL, eta_s = NULL WHERE id = %s AND status IN ('queued', 'running')",
                   (reason, t, t, cycle_id))
        self.event(cycle_id, "failed", reason=reason)
