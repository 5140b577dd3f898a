"""Whether a model is champion yet, read straight from the registry's tables (so `muarl run`
needs neither the registry's code paths nor a running API to decide on the first cycle)."""

from __future__ import annotations

from sqlalchemy import text

from backend.db.engine import make_engine

# the registry's alias table; absent before its migration has run
_ALIASES = "model_aliases"


async def champion_name(url: str) -> str | None:
    """The champion's id, or None when there is none (or the registry tables do not exist)."""
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            if (await conn.execute(text("SELECT to_regclass(:t)"), {"t": _ALIASES})).scalar() is None:
                return None
            row = (await conn.execute(text(f"SELECT version_id FROM {_ALIASES} WHERE alias = 'champion'"))).first()
            return None if row is None or row[0] is None else str(row[0])
    finally:
        await engine.dispose()
