"""A run's search over the publications of its own workspace, and what that search lets it read.

A run's catalog page is bounded, so the earlier publications of a busy workspace fall off it. The run
still reaches them through its search: with a run grant, the latest active versions of the publications
committed to the grant's workspace are searched by their words (title and body), and every hit is
recorded for the run, so that exact version is one it may read (the rule the assets service keeps for
evidence: admitted, or found by the run's own search).
"""

from __future__ import annotations

from services.publication.repository import PublicationRepository
from shared.contracts import publication as c
from shared.contracts.common import Actor, Ref
from shared.db import Database, from_row
from shared.errors import Invalid, NotFound
from shared.grants import GrantClaims

SNIPPET_CHARS = 300


class RunSearch:
    def __init__(self, db: Database, repo: PublicationRepository):
        self._db, self._repo = db, repo

    async def search(
        self, actor: Actor, claims: GrantClaims, req: c.PublicationSearchRequest
    ) -> c.PublicationSearchReply:
        if claims.workspace_id is None:
            raise Invalid("this run's grant names no workspace", {"field": "grant"})
        publications = self._repo.for_scope(actor.scope)
        async with self._db.transaction() as conn:
            rows = await publications.search_workspace(
                conn, workspace_id=claims.workspace_id, q=req.q, limit=req.limit, offset=req.offset
            )
            if rows:
                await publications.record_found(
                    conn,
                    run_id=claims.run_id,
                    ids=[r["id"] for r in rows],
                    versions=[r["version"] for r in rows],
                )
        return c.PublicationSearchReply(
            items=[
                from_row(
                    c.PublicationHit,
                    r,
                    snippet=" ".join(r["snippet"].replace("<b>", "").replace("</b>", "").split())[:SNIPPET_CHARS],
                    score=float(r["score"]),
                )
                for r in rows
            ]
        )

    async def require_readable(self, actor: Actor, claims: GrantClaims, ref: Ref) -> None:
        """Admitted with the run, or found by its own search; anything else does not exist for it."""
        if claims.allows(ref):
            return
        assert ref.version is not None
        async with self._db.statement() as conn:
            found = await self._repo.for_scope(actor.scope).was_found_by(
                conn, run_id=claims.run_id, id=ref.id, version=ref.version
            )
        if not found:
            raise NotFound(
                f"{ref.kind} {ref.id}@{ref.version} is neither in this run's grant nor found by its search",
                {"ref": ref.key()},
            )
