"""Evidence: full-text search over active versions, and reads of one passage at its exact locator.

A snippet is not a delivered passage: only `read` delivers text. A read made for a run is allowed for a
passage the run was admitted with (the evidence ref or its source version), one its own search returned,
or one of its own attachments; every read re-checks the version's state and hashes first.
"""

from __future__ import annotations

import asyncpg

from services.assets import query
from services.assets.lifecycle import sha256_text
from services.assets.repository import AssetsRepository, ScopedAssetsRepository
from services.assets.service import AssetsService, run_namespace
from shared.bus import RequestContext, answers
from shared.contracts import assets as c
from shared.contracts.common import Actor, Ref
from shared.db import Database, from_row
from shared.errors import NotFound, Unavailable
from shared.grants import GrantClaims

# A snippet is a hint for choosing what to read, so it stays short.
SNIPPET_WORDS = 35
# How many passages one query term may bring into the ranking (see ScopedAssetsRepository.search).
CANDIDATES_PER_TERM = 100


class EvidenceService:
    def __init__(self, db: Database, assets: AssetsService, repo: AssetsRepository):
        self._db = db
        self._assets = assets
        self._repo = repo

    @answers(c.SEARCH)
    async def search(self, ctx: RequestContext, req: c.SearchRequest) -> c.SearchReply:
        claims = self._assets.claims(ctx.actor, ctx.grant)
        namespaces = [""] if claims is None else ["", run_namespace(claims.run_id)]
        parsed = query.parse(req.q)
        sources = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            terms = [
                t
                for t in await sources.search_terms(
                    conn,
                    stop_config=parsed.config,
                    configs=parsed.configs,
                    kinds=[t.kind for t in parsed.terms],
                    texts=[t.text for t in parsed.terms],
                )
                if t["q"] is not None
            ]
            # A stopword ("the", "of") is dropped when the question has other words: it would match
            # nearly every passage and count as much as a word that matters.
            kept = [t["q"] for t in terms if not t["stop"]] or [t["q"] for t in terms]
            if not kept:
                return c.SearchReply(items=[])
            rows = await sources.search(
                conn,
                namespaces=namespaces,
                terms=kept,
                source_id=req.source_id,
                limit=req.limit,
                max_snippet_words=SNIPPET_WORDS,
                candidates_per_term=CANDIDATES_PER_TERM,
            )
            if claims is not None and rows:
                # What a run's own search found, it may read (docs/architecture.md); recorded with the search itself.
                await sources.record_hits(conn, run_id=claims.run_id, evidence_ids=[r["evidence_id"] for r in rows])
        return c.SearchReply(
            items=[
                from_row(c.SearchHit, r, snippet=query.tidy_snippet(r["snippet"]), score=float(r["score"]))
                for r in rows
            ]
        )

    @answers(c.READ)
    async def read(self, ctx: RequestContext, req: c.EvidenceReadRequest) -> c.Evidence:
        return await self._read(ctx.actor, self._assets.claims(ctx.actor, ctx.grant), req)

    async def _read(self, actor: Actor, claims: GrantClaims | None, req: c.EvidenceReadRequest) -> c.Evidence:
        sources = self._repo.for_scope(actor.scope)
        async with self._db.pool.acquire() as conn:
            row = await sources.get_evidence(conn, evidence_id=req.evidence_id)
            own_attachment = claims is not None and row is not None and row["namespace"] == run_namespace(claims.run_id)
            if row is None or (row["namespace"] != "" and not own_attachment):
                raise NotFound("evidence not found", {"evidence_id": req.evidence_id})
            if claims is not None and not own_attachment and not await self._granted(conn, sources, claims, row):
                raise NotFound(
                    "this passage is neither in the run's grant nor found by its search",
                    {"evidence_id": req.evidence_id},
                )
        where = {"evidence_id": req.evidence_id, "source_id": row["source_id"], "version": row["version"]}
        if row["source_status"] == "retired" or row["status"] == "retired":
            raise Unavailable(f"the source {row['source_id']} is retired", where, reason="retired")
        if row["status"] in ("superseded", "failed"):
            raise Unavailable(f"version {row['version']} is {row['status']}", where, reason=row["status"])
        if row["status"] != "active":
            raise NotFound("evidence not found", {"evidence_id": req.evidence_id})
        if not row["intact"] or sha256_text(row["text"]) != row["text_hash"]:
            raise Unavailable("the passage does not match its recorded hash", where, reason="failed")
        return from_row(c.Evidence, row)

    @answers(c.LOCATE)
    async def locate(self, ctx: RequestContext, req: c.LocateRequest) -> c.Evidence:
        """A person's read of the passage a ledger row names (source, version, locator): the same rules as `read`."""
        async with self._db.pool.acquire() as conn:
            evidence_id = await self._repo.for_scope(ctx.actor.scope).find_evidence_id(
                conn, source_id=req.source_id, version=req.version, locator=req.locator
            )
        if evidence_id is None:
            raise NotFound("evidence not found", {"source_id": req.source_id, "version": req.version})
        return await self._read(ctx.actor, None, c.EvidenceReadRequest(evidence_id=evidence_id))

    async def _granted(
        self, conn: asyncpg.Connection, sources: ScopedAssetsRepository, claims: GrantClaims, row: asyncpg.Record
    ) -> bool:
        evidence_id, version = row["evidence_id"], row["version"]
        admitted = {
            Ref(kind="evidence", id=evidence_id, version=version).key(),
            Ref(kind="evidence", id=evidence_id).key(),
            Ref(kind="source", id=row["source_id"], version=version).key(),
        }
        if admitted & set(claims.refs):
            return True
        return await sources.was_found_by(conn, run_id=claims.run_id, evidence_id=evidence_id)
