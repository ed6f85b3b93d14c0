"""Drift: a ref the workspace relies on has changed since it was cited.

A workspace relies on what its current checkpoint derives from (`derived_from.publication` and
`.sources`) and on what its associated publications cite (their `sources`, learned from the publication
service's events). When an owner announces that such a ref has a newer version, or that it was withdrawn
or retired, the workspace records one drift per (ref, new version or reason), announces
`workspace.drift_detected`, and adds an open question to its checkpoint through a revision like any other.
The question names what changed and who cited it by their titles, as the workspace's associations know
them. Archived and deleted workspaces get none: their conclusions are no longer being followed.

Whatever workspace they are in, every publication version of the scope that cites the changed version
gets `workspace.citation_changed`, so that its claims are checked again (services/workspace/staleness.py).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Mapping
from functools import partial

import asyncpg

from services.workspace.checkpoint import BadProposal, Checkpoints, Content
from services.workspace.drift_repository import DriftRepository, ScopedDriftRepository
from services.workspace.questions import same_question
from services.workspace.repository import WorkspaceRepository
from services.workspace.service import not_found
from shared.bus import RequestContext, answers
from shared.contracts import workspace as c
from shared.contracts.assets import EVT_SOURCE_RETIRED, EVT_VERSION_ACTIVATED, SourceRetired, VersionActivated
from shared.contracts.common import Ref
from shared.contracts.publication import EVT_COMMITTED, EVT_REVISED, EVT_WITHDRAWN, VersionEvent
from shared.db import Database, from_row
from shared.events import EventContext, consumes
from shared.outbox import enqueue

log = logging.getLogger("dossier.workspace.drift")

# Cited versions (by workspace) of one ref, each with the refs that cite it (empty: the checkpoint itself).
Citations = dict[str, dict[int, list[Ref]]]
Titles = Mapping[tuple[str, str], str]
# A question names this many of the refs citing the changed one, and counts the rest.
NAMED_CITERS = 3
TITLE_CHARS = 120


def named(ref: Ref, titles: Titles) -> str:
    """A ref as a person knows it: “its title” and its version. A source with no title known is named by its
    source id, which a person chose; a publication with none by its id."""
    title = " ".join(titles.get((ref.kind, ref.id), "").split()) or (ref.id if ref.kind == "source" else "")
    if len(title) > TITLE_CHARS:
        title = title[: TITLE_CHARS - 1].rstrip() + "…"
    return f"“{title}” v{ref.version}" if title else f"{ref.id} v{ref.version}"


def question_text(ref: Ref, cited_by: list[Ref], new_version: int | None, reason: str, titles: Titles) -> str:
    """ "“Fund X announcement” v1, cited by “Report B” v1, now has version 2: …": the seeds' week-4 question,
    asked by the system."""
    names = [named(r, titles) for r in cited_by]
    more = len(names) - NAMED_CITERS
    by = ", ".join(names[:NAMED_CITERS]) + (f" and {more} more" if more > 0 else "") or "the checkpoint"
    change = {
        "new_version": f"now has version {new_version}",
        "withdrawn": "has been withdrawn",
        "retired": "has been retired",
    }[reason]
    return f"{named(ref, titles)}, cited by {by}, {change}: does what was concluded from it still hold?"


def cited(version: VersionEvent) -> list[Ref]:
    """The exact versions a publication version cites (a ref without a version drifts never)."""
    return [r for r in version.sources if r.version is not None]


class DriftWatch:
    def __init__(self, db: Database, checkpoints: Checkpoints, repo: WorkspaceRepository | None = None):
        self._db = db
        self._checkpoints = checkpoints
        self._repo = repo or WorkspaceRepository()
        self._drifts = DriftRepository()

    # -- events (each inside the consumer's transaction, with its inbox row) --------------------------

    @consumes(EVT_COMMITTED)
    async def on_publication_committed(self, ctx: EventContext, version: VersionEvent) -> None:
        """What the new version cites, for later drift (after `Associations` recorded the version)."""
        drifts = self._drifts.for_scope(ctx.scope)
        await drifts.lock_refs(ctx.conn, [(r.kind, r.id) for r in cited(version)])
        await self._remember_citations(ctx.conn, drifts, version)

    @consumes(EVT_REVISED)
    async def on_publication_revised(self, ctx: EventContext, version: VersionEvent) -> None:
        drifts = self._drifts.for_scope(ctx.scope)
        await drifts.lock_refs(ctx.conn, [("publication", version.id), *((r.kind, r.id) for r in cited(version))])
        await self._remember_citations(ctx.conn, drifts, version)
        await self._changed(ctx, drifts, "publication", version.id, "new_version", version.version, version.title)

    @consumes(EVT_WITHDRAWN)
    async def on_publication_withdrawn(self, ctx: EventContext, version: VersionEvent) -> None:
        drifts = self._drifts.for_scope(ctx.scope)
        await drifts.lock_refs(ctx.conn, [("publication", version.id)])
        await self._changed(ctx, drifts, "publication", version.id, "withdrawn", version.version, version.title)

    @consumes(EVT_VERSION_ACTIVATED)
    async def on_version_activated(self, ctx: EventContext, activated: VersionActivated) -> None:
        if activated.superseded is None:
            return  # a first version supersedes nothing, so nothing cited can be older
        drifts = self._drifts.for_scope(ctx.scope)
        await drifts.lock_refs(ctx.conn, [("source", activated.source_id)])
        await self._changed(ctx, drifts, "source", activated.source_id, "new_version", activated.version)

    @consumes(EVT_SOURCE_RETIRED)
    async def on_source_retired(self, ctx: EventContext, retired: SourceRetired) -> None:
        drifts = self._drifts.for_scope(ctx.scope)
        await drifts.lock_refs(ctx.conn, [("source", retired.source_id)])
        await self._changed(ctx, drifts, "source", retired.source_id, "retired", 0)

    # -- request -------------------------------------------------------------------------------------

    @answers(c.DRIFT)
    async def list_drifts(self, ctx: RequestContext, req: c.DriftRequest) -> c.DriftList:
        async with self._db.statement() as conn:
            if await self._repo.for_scope(ctx.actor.scope).find_workspace(conn, id=req.workspace_id) is None:
                raise not_found(req.workspace_id)
            drifts = self._drifts.for_scope(ctx.actor.scope)
            page, next_cursor = await drifts.list_drifts(conn, workspace_id=req.workspace_id, page=req)
        return c.DriftList(items=[self._drift(r) for r in page], next_cursor=next_cursor)

    # -- rules ---------------------------------------------------------------------------------------

    async def _remember_citations(
        self, conn: asyncpg.Connection, drifts: ScopedDriftRepository, version: VersionEvent
    ) -> None:
        """Record what `version` cites (its refs held by the caller), and apply to it at once each change of a
        cited ref made after its evidence was read but handled before this event: the owners' events come in no
        order between one another. Its evidence was read from its run's start (`evidence_since`), or, for a
        version a person wrote, from its own time. A change made before then was there to be seen: citing the
        older version was a choice (a run told to read it), not a drift."""
        refs = cited(version)
        if not refs:
            return
        await drifts.insert_citations(
            conn,
            pub_id=version.id,
            pub_version=version.version,
            pub_title=version.title,
            refs=[r.model_dump() for r in refs],
        )
        citing = Ref(kind="publication", id=version.id, version=version.version)
        read_from = version.evidence_since or version.created_at
        changes = await drifts.changes_since(conn, refs=refs, cited_at=read_from)
        for ref, reason, new_version in changes:
            at = partial(operator.eq, ref.version)
            await self._detect(conn, drifts, ref.kind, ref.id, at, new_version, reason, only=citing)

    async def _changed(
        self,
        ctx: EventContext,
        drifts: ScopedDriftRepository,
        kind: str,
        ref_id: str,
        reason: c.DriftReason,
        version: int,
        title: str | None = None,
    ) -> None:
        """A change of a ref (held by the caller), made when its event says: kept for citations recorded later,
        and applied to those recorded already. `version`: the new version, the one withdrawn, or 0 for a
        retirement."""
        conn = ctx.conn
        await drifts.record_change(conn, kind=kind, ref_id=ref_id, reason=reason, version=version, at=ctx.occurred_at)
        if reason == "new_version":
            await self._detect(conn, drifts, kind, ref_id, lambda v: v < version, version, reason, title=title)
        elif reason == "withdrawn":
            await self._detect(conn, drifts, kind, ref_id, partial(operator.eq, version), None, reason, title=title)
        else:
            await self._detect(conn, drifts, kind, ref_id, lambda v: True, None, reason, title=title)

    async def _citations(
        self, conn: asyncpg.Connection, drifts: ScopedDriftRepository, kind: str, ref_id: str
    ) -> Citations:
        found: Citations = {}
        for row in await drifts.cited_by_publications(conn, kind=kind, ref_id=ref_id):
            by = found.setdefault(row["workspace_id"], {}).setdefault(row["ref_version"], [])
            by.append(Ref(kind="publication", id=row["pub_id"], version=row["pub_version"]))
        for row in await drifts.cited_by_checkpoints(conn, kind=kind, ref_id=ref_id):
            derived = c.DerivedFrom.model_validate(row["derived_from"])
            pub = derived.publication
            cited = [s for s in derived.sources if s.kind == kind and s.id == ref_id and s.version is not None]
            if kind == "publication" and pub is not None and pub.id == ref_id:
                cited.append(Ref(kind="publication", id=pub.id, version=pub.version))
            for ref in cited:
                assert ref.version is not None
                by = found.setdefault(row["workspace_id"], {}).setdefault(ref.version, [])
                checkpoint_pub = Ref(kind="publication", id=pub.id, version=pub.version) if pub else None
                if checkpoint_pub is not None and checkpoint_pub != ref and checkpoint_pub not in by:
                    by.append(checkpoint_pub)
        return found

    async def _detect(
        self,
        conn: asyncpg.Connection,
        drifts: ScopedDriftRepository,
        kind: str,
        ref_id: str,
        affected: Callable[[int], bool],
        new_version: int | None,
        reason: c.DriftReason,
        *,
        title: str | None = None,
        only: Ref | None = None,
    ) -> None:
        """`title`: the changed ref's title as its owner announced it, for a workspace that knows none. `only`:
        the one citing publication version whose claims are re-checked (one just recorded); else every one."""
        # Every citing publication version of the scope, whatever its workspace: its claims are re-checked.
        now = Ref(kind=kind, id=ref_id, version=new_version) if new_version is not None else None  # type: ignore[arg-type]
        scope = drifts.scope
        for row in await drifts.citing_publications(conn, kind=kind, ref_id=ref_id):
            if only is not None and (row["pub_id"], row["pub_version"]) != (only.id, only.version):
                continue
            if affected(row["ref_version"]):
                changed = c.CitationChanged(
                    publication=Ref(kind="publication", id=row["pub_id"], version=row["pub_version"]),
                    ref=Ref(kind=kind, id=ref_id, version=row["ref_version"]),  # type: ignore[arg-type]
                    reason=reason,
                    now=now,
                )
                await enqueue(conn, c.EVT_CITATION_CHANGED, changed, scope=scope)
        for workspace_id, versions in (await self._citations(conn, drifts, kind, ref_id)).items():
            for version, cited_by in sorted(versions.items()):
                if affected(version):
                    ref = Ref(kind=kind, id=ref_id, version=version)  # type: ignore[arg-type]
                    await self._record(conn, drifts, workspace_id, ref, cited_by, new_version, reason, title)

    async def _record(
        self,
        conn: asyncpg.Connection,
        drifts: ScopedDriftRepository,
        workspace_id: str,
        ref: Ref,
        cited_by: list[Ref],
        new_version: int | None,
        reason: c.DriftReason,
        title: str | None,
    ) -> None:
        scope = drifts.scope
        row = await drifts.insert_drift(
            conn,
            workspace_id=workspace_id,
            ref=ref.model_dump(),
            cited_by=[r.model_dump() for r in cited_by],
            new_version=new_version,
            reason=reason,
        )
        if row is None:
            return  # this change of this ref was already recorded for this workspace
        drift = self._drift(row)
        data = c.DriftDetected(workspace_id=workspace_id, **drift.model_dump())
        await enqueue(conn, c.EVT_DRIFT_DETECTED, data, scope=scope)
        known = await drifts.titles(conn, workspace_id=workspace_id, refs=[(r.kind, r.id) for r in [ref, *cited_by]])
        titles = ({(ref.kind, ref.id): title} if title else {}) | known
        text = question_text(ref, cited_by, new_version, reason, titles)
        asked: list[str] = []

        def ask(previous: Content) -> Content:
            questions = self._checkpoints.questions_with(previous, text)
            asked[:] = [q.id for q in questions if q.status == "open" and same_question(q.text, text)]
            return Content(previous.summary, questions, previous.derived_from)

        try:
            await self._checkpoints.write_in(
                conn, scope=scope, workspace_id=workspace_id, expected_revision=None, build=ask, author="system"
            )
        except BadProposal as exc:
            # The drift stays recorded and announced; only the question could not be added (e.g. too many open).
            log.warning("drift question not added to %s: %s", workspace_id, exc.reason)
            return
        if asked:
            # A later run that reads the new version answers this question (services/workspace/questions.py).
            await drifts.set_question(conn, seq=row["seq"], question_id=asked[0])

    @staticmethod
    def _drift(row: asyncpg.Record) -> c.Drift:
        return from_row(c.Drift, row, ref=Ref(kind=row["ref_kind"], id=row["ref_id"], version=row["ref_version"]))
