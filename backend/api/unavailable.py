"""Telling "the database cannot serve right now" apart from a bug: a refused or dropped
connection, a database that does not exist or is not migrated, an exhausted pool or a server
shutting down is the service being unavailable (503 with `Retry-After`, the client should
retry), not an internal error (500)."""

from __future__ import annotations

import asyncpg
from sqlalchemy import exc as sa_exc

RETRY_AFTER_S = 5

# SQLSTATE classes and codes that mean "not available", not "wrong statement"
_UNAVAILABLE_CLASSES = ("08", "28", "53", "57")  # connection, authorization, resources, operator intervention
_UNMIGRATED = {"42P01", "42703", "3D000"}  # undefined table / column, unknown database


def database_unavailable(error: BaseException) -> str | None:
    """Why the database cannot serve (`unreachable`, `not migrated`, `busy`), or None when
    `error` is something else. Looks through SQLAlchemy's wrappers and exception chains."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, sa_exc.TimeoutError):  # no pooled connection came free in time
            return "busy"
        if isinstance(e, OSError | asyncpg.ConnectionDoesNotExistError):  # refused, reset, timed out, closed
            return "unreachable"
        sqlstate = getattr(e, "sqlstate", None)
        if isinstance(sqlstate, str):
            if sqlstate in _UNMIGRATED:
                return "not migrated"
            if sqlstate[:2] in _UNAVAILABLE_CLASSES:
                return "unreachable" if sqlstate[:2] in ("08", "57", "28") else "busy"
        if isinstance(e, sa_exc.DBAPIError) and e.connection_invalidated:
            return "unreachable"
        todo += [getattr(e, "orig", None), e.__cause__, e.__context__]
    return None


def unavailable_detail(reason: str) -> str:
    return {
        "not migrated": "The service's database is not set up (not migrated); please retry later.",
        "busy": "The service is busy; please retry in a few seconds.",
    }.get(reason, "The service's database cannot be reached; please retry in a few seconds.")
