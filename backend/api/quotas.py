"""Per-client quotas: how many conversations one client may start, and how many customer
messages it may send across all its conversations, per hour (`MUARL_RATE_CONVERSATIONS_PER_HOUR`,
`MUARL_RATE_MESSAGES_PER_HOUR`; 0 turns a quota off). Without them anyone could start
conversations without end, each with a fresh per-conversation rate limit.

A client is the peer address, or the first address of `MUARL_RATE_CLIENT_HEADER` (e.g.
`X-Forwarded-For`) when the service runs behind a proxy that sets it. Counts live in
Postgres (`client_quotas`, one row per client, kind and hour), so every server process
shares them; taking one unit is one statement, and a client's older windows are deleted by
the same statement. Over the quota: 429 with `Retry-After` (seconds until the window ends).
"""

from __future__ import annotations

import math
import time
from typing import Literal

import asyncpg
from fastapi import Request

from backend.api.problems import Problem
from backend.config import Settings

Kind = Literal["conversations", "messages"]
WINDOW_S = 3600

_TAKE = """
WITH window_start AS (SELECT to_timestamp(floor(extract(epoch FROM now()) / $4) * $4) AS start),
old AS (DELETE FROM client_quotas WHERE client = $1 AND kind = $2
          AND window_start < (SELECT start FROM window_start))
INSERT INTO client_quotas AS q (client, kind, window_start, used)
SELECT $1, $2, start, 1 FROM window_start
ON CONFLICT (client, kind, window_start) DO UPDATE SET used = q.used + 1 WHERE q.used < $3
RETURNING used
"""

_WHAT = {"conversations": "new conversations", "messages": "messages"}


def client_of(request: Request, settings: Settings) -> str:
    """Who is asking, for quotas: the peer address or the configured proxy header's first address."""
    if settings.rate_client_header:
        forwarded = request.headers.get(settings.rate_client_header)
        if forwarded:
            return forwarded.split(",")[0].strip()[:64] or "unknown"
    return (request.client.host if request.client else "unknown")[:64]


def limit_of(settings: Settings, kind: Kind) -> int:
    return settings.rate_conversations_per_hour if kind == "conversations" else settings.rate_messages_per_hour


async def take(pg: asyncpg.Connection, settings: Settings, client: str, kind: Kind) -> None:
    """Count one unit of `kind` for `client`, or raise 429 when its quota for this hour is used up."""
    limit = limit_of(settings, kind)
    if limit <= 0:
        return
    used = await pg.fetchval(_TAKE, client, kind, limit, float(WINDOW_S))
    if used is None:
        retry = max(1, math.ceil(WINDOW_S - time.time() % WINDOW_S))
        raise Problem(429, f"At most {limit} {_WHAT[kind]} per hour are accepted from one client; "
                           f"please retry in {retry} seconds.", headers={"Retry-After": str(retry)})
