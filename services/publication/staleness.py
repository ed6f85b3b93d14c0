"""Stale claims: a claim says so when a version it cites got a successor, or was withdrawn or retired.

The claims of a version are immutable (they say what its run read then). What changed under them since is
kept beside them, one change a claim, as the workspace reports it after re-checking the claim against a
source's successor (services/workspace/staleness.py). A publication's successor is this service's own, so
it checks the claim against the successor's body here, as the run's check read a publication: whole. A
claim shows the weightiest change: a withdrawal or a retirement is never hidden by a later successor, and a
successor never by an older one of the same ref.
"""

from __future__ import annotations

import asyncpg

from services.publication.repository import PublicationRepository, ScopedPublicationRepository
from services.publication.service import sha256_text
from shared.bus import RequestContext, answers
from shared.contracts import publication as c
from shared.contracts.common import Ref
from shared.contracts.publication import Support
from shared.db import Database
from shared.errors import NotFound
from shared.support import checked_words, grade, support_score


def recheck_against(claim: c.Claim, body: str) -> Support:
    """A claim's support by a publication's whole body."""
    return grade(support_score(checked_words(claim), body))


def outranks(shown: c.Stale | None, new: c.Stale) -> bool:
    """Whether the change a claim shows now stays, rather than `new` taking its place."""
    if shown is None:
        return False
    if shown.reason != "new_version":
        # A withdrawal or retirement stays, unless the same is reported again (a re-check replaces itself).
        return not (new.reason == shown.reason and new.ref == shown.ref)
    if new.reason != "new_version":
        return False
    if shown.ref != new.ref or shown.now is None or new.now is None:
        return False
    return (shown.now.version or 0) > (new.now.version or 0)


class StaleMarks:
    def __init__(self, db: Database, repo: PublicationRepository | None = None):
        self._db = db
        self._repo = repo or PublicationRepository()

    @answers(c.MARK_STALE)
    async def mark_stale(self, ctx: RequestContext, req: c.MarkStaleRequest) -> c.MarkStaleReply:
        """Keeps each mark whose claim cites the changed ref, unless the claim already shows a weightier change.
        Marking the same again changes nothing, so a redelivered re-check is harmless."""
        publications = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            # The version's row lock orders concurrent re-checks of the same claims.
            row = await publications.get_version(conn, id=req.id, version=req.version, for_update=True)
            if row is None:
                raise NotFound("publication version not found", {"id": req.id, "version": req.version})
            claims = [c.Claim.model_validate(item) for item in row["claims"]]
            indexes = sorted({m.index for m in req.marks if m.index < len(claims)})
            shown = {
                i: c.Stale.model_validate(stale)
                for i, stale in (
                    await publications.claim_stale(conn, id=req.id, version=req.version, indexes=indexes)
                ).items()
            }
            kept: dict[int, c.Stale] = {}
            bodies: dict[str, str | None] = {}
            for mark in req.marks:
                if mark.index >= len(claims) or mark.stale.ref not in claims[mark.index].refs:
                    continue  # a mark for a claim that does not cite the ref changes nothing
                stale = mark.stale
                if stale.now is not None and stale.now.kind == "publication":
                    if stale.now.key() not in bodies:
                        bodies[stale.now.key()] = await self._successor_body(conn, publications, stale.now)
                    body = bodies[stale.now.key()]
                    support = None if body is None else recheck_against(claims[mark.index], body)
                    stale = stale.model_copy(update={"support_now": support})
                if outranks(shown.get(mark.index), stale):
                    continue
                shown[mark.index] = kept[mark.index] = stale
            await publications.put_claim_stale(
                conn,
                id=req.id,
                version=req.version,
                marks=[(i, stale.model_dump(mode="json")) for i, stale in kept.items()],
            )
        return c.MarkStaleReply(marked=len(kept))

    async def _successor_body(
        self, conn: asyncpg.Connection, publications: ScopedPublicationRepository, now: Ref
    ) -> str | None:
        """The successor's body when it could be read now (active, intact); else None: not checked."""
        if now.version is None:
            return None
        row = await publications.get_version(conn, id=now.id, version=now.version)
        if row is None or row["status"] != "active" or sha256_text(row["body"]) != row["content_hash"]:
            return None
        return str(row["body"])
