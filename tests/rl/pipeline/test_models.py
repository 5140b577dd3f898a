"""The cycle's registry calls (rl/pipeline/models.py) against a real registry."""

from __future__ import annotations

from backend.db.engine import make_engine
from backend.serving.registry import ModelRegistry, NewVersion
from rl.pipeline.models import record_report


async def test_a_rerun_gate_step_records_its_report_once(live_db: str) -> None:
    engine = make_engine(live_db, null_pool=True)
    try:
        reg = ModelRegistry(engine)
        cand = await reg.register(NewVersion(name="cand", artifact_uri="http://127.0.0.1:9/v1", engine="external",
                                             served_name="cand"), actor="test")
        report = {"passed": False, "checks": [], "meta": {"cycle": "c1"}}
        first = await record_report(live_db, cand.id, None, report, "# report", None)
        # the step crashed after the insert and before writing the id: the rerun finds the same report
        assert await record_report(live_db, cand.id, None, report, "# report", None) == first
        assert [r.id for r in await reg.gate_reports(cand.id)] == [first]
        # another cycle's report (or a report without a cycle) is a new one
        other = await record_report(live_db, cand.id, None, {**report, "meta": {"cycle": "c2"}}, "", None)
        assert other != first and len(await reg.gate_reports(cand.id)) == 2
    finally:
        await engine.dispose()
