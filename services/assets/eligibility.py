"""Eligibility of source refs for other services (workspace catalog, checkpoint validation).

A ref is available only when it names, in the caller's scope, an active version whose identity key still
matches its recorded content hash. Otherwise the reason says why: superseded, retired, failed, or
not_found (missing, another scope's, or a version still being registered or extracted).
"""

from __future__ import annotations

import asyncpg

from services.assets.repository import AssetsRepository
from shared.bus import RequestContext, answers
from shared.contracts import assets as c
from shared.contracts.common import CheckReply, CheckRequest, Eligibility, Ref
from shared.db import Database, from_row


class SourceChecks:
    def __init__(self, db: Database, repo: AssetsRepository):
        self._db = db
        self._repo = repo

    @answers(c.CHECK)
    async def check(self, ctx: RequestContext, req: CheckRequest) -> CheckReply:
        """One item per ref, in the order asked, from ONE query; refs of other kinds are not_found here."""
        wanted = [(i, r) for i, r in enumerate(req.refs) if r.kind == "source"]
        async with self._db.statement() as conn:
            rows = await self._repo.for_scope(ctx.actor.scope).check_sources(
                conn, ids=[r.id for _, r in wanted], versions=[r.version for _, r in wanted]
            )
        found = {wanted[row["ord"] - 1][0]: row for row in rows}
        return CheckReply(items=[_eligibility(ref, found.get(i)) for i, ref in enumerate(req.refs)])


def _eligibility(ref: Ref, row: asyncpg.Record | None) -> Eligibility:
    if row is None:
        return Eligibility(ref=ref, available=False, reason="not_found")
    status = row["status"]
    if row["source_status"] == "retired" or status == "retired":
        reason: str | None = "retired"
    elif status in ("superseded", "failed"):
        reason = status
    elif status != "active":
        reason = "not_found"  # still being registered or extracted: not a usable version yet
    elif not row["intact"]:
        reason = "failed"
    else:
        reason = None
    return from_row(
        Eligibility,
        row,
        ref=Ref(kind="source", id=row["source_id"], version=row["version"]),
        available=reason is None,
        reason=reason,
        title=row["filename"] or row["source_id"],
    )
