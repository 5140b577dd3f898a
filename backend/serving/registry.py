"""The model registry: register immutable versions, store gate reports, move the aliases.

`ModelRegistry(engine)` is the one API everything else calls (CLI, ops HTTP, the training
cycle, the chat service):

- `register_folder(path, ...)` / `register(NewVersion(...))` / `external_version(url, model)`
  add a version (and a `register` event);
- `record_gate_report(candidate_id, baseline_id, report, markdown)` stores a gate report
  (and a `gate` event); `passed_gate(candidate_id)` finds a passed report against the current
  champion;
- `switch_champion(id, ...)`, `rollback(...)`, `set_candidate(...)`, `retire(...)` change the
  aliases: each in one transaction that first locks the three alias rows (so concurrent
  promotions serialize), appends its event, bumps the alias generation and sends
  `NOTIFY muarl_model_aliases` so serving processes drop their cached champion;
- `champion()`, `get(id)`, `list_versions()`, `events()`, `gate_reports(id)` read.

Promotion as ops see it (load the adapter on its engine before switching) is
`backend.serving.promotion.promote`, built on `switch_champion`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend.db.registry_models import ALIASES, ENGINES, KINDS
from backend.serving.artifacts import read_model_folder

NOTIFY_CHANNEL = "muarl_model_aliases"


class RegistryError(Exception):
    """A registry request that cannot be done; `status` is the HTTP status it maps to."""

    status = 400


class VersionNotFound(RegistryError):
    status = 404


class GatesNotPassed(RegistryError):
    status = 409


class AliasConflict(RegistryError):
    status = 409


@dataclass
class NewVersion:
    """What a new version records (everything but its id and time)."""

    name: str
    artifact_uri: str
    kind: str = "full"
    engine: str = "local"
    served_name: str | None = None  # default: "<name>-<id>"
    artifact_sha256: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    base_version_id: str | None = None
    parent_version_id: str | None = None
    recipe: dict[str, Any] | None = None
    training_run: str | None = None
    store_snapshot: str | None = None
    training_metrics: dict[str, Any] | None = None
    view: dict[str, Any] | None = None


@dataclass
class Version:
    id: str
    name: str
    artifact_uri: str
    artifact_sha256: str | None
    kind: str
    engine: str
    served_name: str
    base_version_id: str | None
    parent_version_id: str | None
    recipe: dict[str, Any] | None
    training_run: str | None
    store_snapshot: str | None
    training_metrics: dict[str, Any] | None
    view: dict[str, Any] | None
    created_at: dt.datetime
    files: dict[str, str] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)
    retired: bool = False

    def to_json(self, *, files: bool = False) -> dict[str, Any]:
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat()
        if not files:
            out.pop("files")
        return out


@dataclass
class GateReportRecord:
    id: int
    candidate_id: str
    baseline_id: str | None
    passed: bool
    suite: str | None
    report: dict[str, Any]
    markdown: str
    created_at: dt.datetime

    def to_json(self, *, markdown: bool = False) -> dict[str, Any]:
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat()
        if not markdown:
            out.pop("markdown")
        return out


@dataclass
class Event:
    id: int
    kind: str
    version_id: str | None
    actor: str
    reason: str
    from_version_id: str | None
    to_version_id: str | None
    gate_report_id: int | None
    details: dict[str, Any]
    created_at: dt.datetime

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["created_at"] = self.created_at.isoformat()
        return out


@dataclass
class AliasChange:
    """What an alias move did: the event it appended and the champion before and after."""

    event: Event
    champion_before: str | None
    champion_after: str | None
    generation: int


_VERSION_COLS = ("id, name, artifact_uri, artifact_sha256, kind, engine, served_name, base_version_id, "
                 "parent_version_id, recipe, training_run, store_snapshot, training_metrics, view, created_at, files")
_EVENT_COLS = ("id, kind, version_id, actor, reason, from_version_id, to_version_id, gate_report_id, details, "
               "created_at")
_REPORT_COLS = "id, candidate_id, baseline_id, passed, suite, report, markdown, created_at"
_SERVED_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def _version(row: Any, aliases: dict[str, str | None], retired: set[str]) -> Version:
    m = dict(row._mapping)
    return Version(**m, aliases=[a for a in ALIASES if aliases.get(a) == m["id"]], retired=m["id"] in retired)


def _event(row: Any) -> Event:
    return Event(**dict(row._mapping))


def _report(row: Any) -> GateReportRecord:
    return GateReportRecord(**dict(row._mapping))


def _j(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


class ModelRegistry:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    # -- registering --------------------------------------------------------------------

    async def register(self, new: NewVersion, *, actor: str, reason: str = "") -> Version:
        """Add an immutable version (and its `register` event); returns it."""
        if new.kind not in KINDS:
            raise RegistryError(f"kind must be one of {', '.join(KINDS)} (got {new.kind!r})")
        if new.engine not in ENGINES:
            raise RegistryError(f"engine must be one of {', '.join(ENGINES)} (got {new.engine!r})")
        if not new.name.strip() or len(new.name) > 128:
            raise RegistryError("a version's name must be 1 to 128 characters")
        if new.kind == "adapter" and not new.base_version_id:
            raise RegistryError("an adapter needs its base version (--base ID)")
        async with self.engine.begin() as conn:
            vid = await self._insert(conn, new, actor, reason)
        found = await self.get(vid)
        assert found is not None
        return found

    async def _insert(self, conn: AsyncConnection, new: NewVersion, actor: str, reason: str) -> str:
        """Insert a version and its `register` event in the caller's transaction; its id."""
        for ref, what in ((new.base_version_id, "base"), (new.parent_version_id, "parent")):
            if ref is not None and await self._exists(conn, ref) is None:
                raise VersionNotFound(f"there is no version {ref!r} (given as {what})")
        if new.base_version_id is not None:
            base_kind = await self._exists(conn, new.base_version_id)
            if base_kind != "full":
                raise RegistryError(f"the base {new.base_version_id} is an adapter; an adapter's base is "
                                    "a full model")
        seq = (await conn.execute(text("SELECT nextval('model_version_seq')"))).scalar_one()
        vid = f"v{seq}"
        served = new.served_name or _SERVED_NAME.sub("-", f"{new.name}-{vid}").strip("-")[:256]
        await conn.execute(text(
            "INSERT INTO model_versions (id, seq, name, artifact_uri, artifact_sha256, files, kind, "
            "base_version_id, parent_version_id, recipe, training_run, store_snapshot, training_metrics, "
            "view, engine, served_name) VALUES (:id, :seq, :name, :uri, :sha, CAST(:files AS jsonb), :kind, "
            ":base, :parent, CAST(:recipe AS jsonb), :run, :snap, CAST(:metrics AS jsonb), "
            "CAST(:view AS jsonb), :engine, :served)"),
            {"id": vid, "seq": seq, "name": new.name, "uri": new.artifact_uri, "sha": new.artifact_sha256,
             "files": json.dumps(new.files), "kind": new.kind, "base": new.base_version_id,
             "parent": new.parent_version_id, "recipe": _j(new.recipe), "run": new.training_run,
             "snap": new.store_snapshot, "metrics": _j(new.training_metrics), "view": _j(new.view),
             "engine": new.engine, "served": served})
        await self._append(conn, "register", vid, actor, reason, None, vid, None,
                           {"artifact_sha256": new.artifact_sha256, "engine": new.engine, "served_name": served})
        return vid

    async def register_folder(self, path: str | Path, *, actor: str, name: str | None = None,
                              parent: str | None = None, base: str | None = None, engine: str = "local",
                              served_name: str | None = None, reason: str = "") -> Version:
        """Register a model folder written by our pipeline (see `backend.serving.artifacts`)."""
        folder = read_model_folder(path)
        manifest = folder.manifest
        return await self.register(NewVersion(
            name=name or str(manifest.get("name") or folder.path.name), artifact_uri=str(folder.path),
            kind=folder.kind, engine=engine, served_name=served_name, artifact_sha256=folder.sha256,
            files=folder.files, base_version_id=base or manifest.get("base_version"),
            parent_version_id=parent or manifest.get("parent_version"), recipe=folder.recipe,
            training_run=folder.training_run, store_snapshot=folder.store_snapshot,
            training_metrics=folder.training, view=folder.view), actor=actor, reason=reason)

    async def external_version(self, base_url: str, model: str, *, actor: str = "config") -> Version:
        """The version standing for an explicitly configured endpoint (registered on first use; an
        advisory lock keeps processes starting together from registering it twice)."""
        find = text(f"SELECT {_VERSION_COLS} FROM model_versions WHERE engine = 'external' AND served_name = :m "
                    "AND artifact_uri = :u ORDER BY seq LIMIT 1")
        async with self.engine.begin() as conn:
            await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"{base_url}\n{model}"})
            row = (await conn.execute(find, {"m": model, "u": base_url})).first()
            if row is None:
                await self._insert(conn, NewVersion(name=model[:128], artifact_uri=base_url, engine="external",
                                                    served_name=model), actor,
                                   "configured endpoint (MUARL_LLM_BASE_URL / MUARL_LLM_MODEL)")
                row = (await conn.execute(find, {"m": model, "u": base_url})).one()
        return _version(row, {}, set())

    # -- reading ------------------------------------------------------------------------

    async def get(self, version_id: str) -> Version | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(text(f"SELECT {_VERSION_COLS} FROM model_versions WHERE id = :id"),
                                      {"id": version_id})).first()
            if row is None:
                return None
            return _version(row, await self._aliases(conn), await self._retired(conn))

    async def require(self, version_id: str) -> Version:
        found = await self.get(version_id)
        if found is None:
            raise VersionNotFound(f"there is no model version {version_id!r}")
        return found

    async def list_versions(self) -> list[Version]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(text(f"SELECT {_VERSION_COLS} FROM model_versions ORDER BY seq"))).all()
            aliases, retired = await self._aliases(conn), await self._retired(conn)
        return [_version(r, aliases, retired) for r in rows]

    async def aliases(self) -> dict[str, str | None]:
        async with self.engine.connect() as conn:
            return await self._aliases(conn)

    async def champion(self) -> Version | None:
        """The version customers get now (None when nothing was promoted yet)."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(text(
                f"SELECT {', '.join('v.' + c.strip() for c in _VERSION_COLS.split(','))}, a.generation "
                "FROM model_aliases a JOIN model_versions v ON v.id = a.version_id "
                "WHERE a.alias = 'champion'"))).first()
        if row is None:
            return None
        m = dict(row._mapping)
        m.pop("generation")
        return Version(**m, aliases=["champion"])

    async def generation(self) -> int:
        """Grows with every alias change (what a cached champion is checked against)."""
        async with self.engine.connect() as conn:
            return int((await conn.execute(text("SELECT max(generation) FROM model_aliases"))).scalar_one() or 0)

    async def events(self, *, version_id: str | None = None, limit: int = 100) -> list[Event]:
        """Newest first."""
        where = "WHERE version_id = :v OR from_version_id = :v OR to_version_id = :v" if version_id else ""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(text(
                f"SELECT {_EVENT_COLS} FROM model_events {where} ORDER BY id DESC LIMIT :n"),
                {"v": version_id, "n": limit})).all()
        return [_event(r) for r in rows]

    async def gate_reports(self, candidate_id: str) -> list[GateReportRecord]:
        """Newest first."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(text(
                f"SELECT {_REPORT_COLS} FROM model_gate_reports WHERE candidate_id = :c ORDER BY id DESC"),
                {"c": candidate_id})).all()
        return [_report(r) for r in rows]

    async def gate_report(self, report_id: int) -> GateReportRecord | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(text(f"SELECT {_REPORT_COLS} FROM model_gate_reports WHERE id = :i"),
                                      {"i": report_id})).first()
        return None if row is None else _report(row)

    async def passed_gate(self, candidate_id: str) -> GateReportRecord | None:
        """The newest passed gate report of `candidate_id` against the current champion."""
        async with self.engine.connect() as conn:
            champion = (await self._aliases(conn))["champion"]
            return await self._passed_gate(conn, candidate_id, champion)

    # -- gate reports -------------------------------------------------------------------

    async def record_gate_report(self, candidate_id: str, baseline_id: str | None, report: dict[str, Any],
                                 markdown: str = "", *, actor: str, suite: str | None = None) -> GateReportRecord:
        """Store a gate report (its `passed` decides) and append a `gate` event."""
        if not isinstance(report.get("passed"), bool):
            raise RegistryError("a gate report must say whether it passed (\"passed\": true|false)")
        async with self.engine.begin() as conn:
            for ref in (candidate_id, baseline_id):
                if ref is not None and await self._exists(conn, ref) is None:
                    raise VersionNotFound(f"there is no model version {ref!r}")
            row = (await conn.execute(text(
                f"INSERT INTO model_gate_reports (candidate_id, baseline_id, passed, suite, report, markdown) "
                f"VALUES (:c, :b, :p, :s, CAST(:r AS jsonb), :md) RETURNING {_REPORT_COLS}"),
                {"c": candidate_id, "b": baseline_id, "p": report["passed"], "s": suite,
                 "r": json.dumps(report, default=str), "md": markdown})).one()
            record = _report(row)
            await self._append(conn, "gate", candidate_id, actor, "passed" if record.passed else "failed",
                               baseline_id, candidate_id, record.id, {"passed": record.passed, "suite": suite})
        return record

    # -- moving aliases -----------------------------------------------------------------

    async def switch_champion(self, version_id: str, *, actor: str, reason: str,
                              skip_gates: bool = False) -> AliasChange:
        """Make `version_id` the champion (the old one becomes `previous`), in one transaction under
        the alias row locks. Refused unless it has a passed gate report against the champion of
        that moment, or `skip_gates` (the event says so)."""
        _need_reason(reason)
        async with self.engine.begin() as conn:
            aliases = await self._lock_aliases(conn)
            kind = await self._exists(conn, version_id)
            if kind is None:
                raise VersionNotFound(f"there is no model version {version_id!r}")
            if version_id in await self._retired(conn):
                raise AliasConflict(f"{version_id} is retired and cannot be promoted")
            champion = aliases["champion"]
            if champion == version_id:
                raise AliasConflict(f"{version_id} is already the champion")
            report = await self._passed_gate(conn, version_id, champion)
            if report is None and not skip_gates:
                against = f"the champion {champion}" if champion else "the floor (there is no champion yet)"
                raise GatesNotPassed(f"{version_id} has no passed gate report against {against}; run "
                                     f"`muarl gate run --candidate {version_id} --out DIR` first, or promote with "
                                     "--skip-gates (recorded in the event)")
            changes = {"champion": version_id, "previous": champion}
            if aliases["candidate"] == version_id:
                changes["candidate"] = None
            generation = await self._move(conn, changes)
            event = await self._append(conn, "promote", version_id, actor, reason, champion, version_id,
                                       report.id if report else None,
                                       {"skip_gates": skip_gates and report is None, "generation": generation})
        return AliasChange(event, champion, version_id, generation)

    async def rollback(self, *, actor: str, reason: str) -> AliasChange:
        """Make `previous` the champion again; `previous` is then empty (a rollback is not undone by
        another rollback: the rolled-back version needs a new promotion)."""
        _need_reason(reason)
        async with self.engine.begin() as conn:
            aliases = await self._lock_aliases(conn)
            previous, champion = aliases["previous"], aliases["champion"]
            if previous is None:
                raise AliasConflict("there is no previous version to roll back to")
            generation = await self._move(conn, {"champion": previous, "previous": None})
            event = await self._append(conn, "rollback", previous, actor, reason, champion, previous, None,
                                       {"generation": generation})
        return AliasChange(event, champion, previous, generation)

    async def set_candidate(self, version_id: str | None, *, actor: str, reason: str = "") -> AliasChange:
        async with self.engine.begin() as conn:
            aliases = await self._lock_aliases(conn)
            if version_id is not None and await self._exists(conn, version_id) is None:
                raise VersionNotFound(f"there is no model version {version_id!r}")
            generation = await self._move(conn, {"candidate": version_id})
            event = await self._append(conn, "alias", version_id, actor, reason, aliases["candidate"], version_id,
                                       None, {"alias": "candidate", "generation": generation})
        return AliasChange(event, aliases["champion"], aliases["champion"], generation)

    async def retire(self, version_id: str, *, actor: str, reason: str) -> Event:
        """Retire a version: it can no longer be promoted (nor rolled back to); the champion
        cannot be retired."""
        _need_reason(reason)
        async with self.engine.begin() as conn:
            aliases = await self._lock_aliases(conn)
            if await self._exists(conn, version_id) is None:
                raise VersionNotFound(f"there is no model version {version_id!r}")
            if aliases["champion"] == version_id:
                raise AliasConflict(f"{version_id} is the champion; promote another version before retiring it")
            changes = {a: None for a in ("previous", "candidate") if aliases[a] == version_id}
            generation = await self._move(conn, changes) if changes else None
            return await self._append(conn, "retire", version_id, actor, reason, version_id, None, None,
                                      {"cleared": sorted(changes), "generation": generation})

    # -- internals ----------------------------------------------------------------------

    @staticmethod
    async def _exists(conn: AsyncConnection, version_id: str) -> str | None:
        """The version's kind, or None when there is no such version."""
        return (await conn.execute(text("SELECT kind FROM model_versions WHERE id = :id"),
                                   {"id": version_id})).scalar_one_or_none()

    @staticmethod
    async def _aliases(conn: AsyncConnection) -> dict[str, str | None]:
        rows = (await conn.execute(text("SELECT alias, version_id FROM model_aliases"))).all()
        return {a: None for a in ALIASES} | {r.alias: r.version_id for r in rows}

    @staticmethod
    async def _lock_aliases(conn: AsyncConnection) -> dict[str, str | None]:
        rows = (await conn.execute(text(
            "SELECT alias, version_id FROM model_aliases ORDER BY alias FOR UPDATE"))).all()
        return {a: None for a in ALIASES} | {r.alias: r.version_id for r in rows}

    @staticmethod
    async def _retired(conn: AsyncConnection) -> set[str]:
        rows = await conn.execute(text("SELECT DISTINCT version_id FROM model_events WHERE kind = 'retire'"))
        return {r.version_id for r in rows}

    @staticmethod
    async def _passed_gate(conn: AsyncConnection, candidate_id: str,
                           champion: str | None) -> GateReportRecord | None:
        row = (await conn.execute(text(
            f"SELECT {_REPORT_COLS} FROM model_gate_reports WHERE candidate_id = :c AND passed "
            "AND baseline_id IS NOT DISTINCT FROM :b ORDER BY id DESC LIMIT 1"),
            {"c": candidate_id, "b": champion})).first()
        return None if row is None else _report(row)

    @staticmethod
    async def _move(conn: AsyncConnection, changes: dict[str, str | None]) -> int:
        generation = int((await conn.execute(text("SELECT max(generation) FROM model_aliases"))).scalar_one()) + 1
        for alias, version_id in changes.items():
            await conn.execute(text(
                "UPDATE model_aliases SET version_id = :v, generation = :g, updated_at = now() WHERE alias = :a"),
                {"v": version_id, "g": generation, "a": alias})
        # delivered when the transaction commits: serving processes drop their cached champion
        await conn.execute(text("SELECT pg_notify(:ch, :g)"), {"ch": NOTIFY_CHANNEL, "g": str(generation)})
        return generation

    @staticmethod
    async def _append(conn: AsyncConnection, kind: str, version_id: str | None, actor: str, reason: str,
                      from_id: str | None, to_id: str | None, report_id: int | None,
                      details: dict[str, Any]) -> Event:
        row = (await conn.execute(text(
            f"INSERT INTO model_events (kind, version_id, actor, reason, from_version_id, to_version_id, "
            f"gate_report_id, details) VALUES (:k, :v, :a, :r, :f, :t, :g, CAST(:d AS jsonb)) "
            f"RETURNING {_EVENT_COLS}"),
            {"k": kind, "v": version_id, "a": actor[:128], "r": reason, "f": from_id, "t": to_id, "g": report_id,
             "d": json.dumps(details, default=str)})).one()
        return _event(row)


def _need_reason(reason: str) -> None:
    if not reason or not reason.strip():
        raise RegistryError("a reason is required (it is recorded in the event)")
