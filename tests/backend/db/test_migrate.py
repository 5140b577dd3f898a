"""backend/db/migrate.py on a real server: a new database has no revision, upgrades go step by step
to the head of migrations/ and build the store's tables."""

from alembic.script import ScriptDirectory
from sqlalchemy import text

from backend.db.engine import make_engine
from backend.db.migrate import alembic_config, current_revision, upgrade_database


async def _tables(url: str) -> set[str]:
    engine = make_engine(url, null_pool=True)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
            return set(rows.scalars())
    finally:
        await engine.dispose()


async def test_upgrade_step_by_step_to_the_head(test_dbs):
    url = await test_dbs.create("migrate", migrate=False)
    assert await current_revision(url) is None
    assert await _tables(url) == set()
    script = ScriptDirectory.from_config(alembic_config())
    first = script.get_base()
    await upgrade_database(url, first)
    assert await current_revision(url) == first
    after_first = await _tables(url)
    assert {"customers", "orders", "alembic_version"} <= after_first
    await upgrade_database(url)
    assert await current_revision(url) == script.get_current_head()
    assert await _tables(url) >= after_first
    await upgrade_database(url)  # at the head already: nothing to do
    assert await current_revision(url) == script.get_current_head()
