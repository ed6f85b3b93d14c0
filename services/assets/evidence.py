"""Evidence: full-text search over active versions, and reads of one passage at its exact locator.

A snippet is not a delivered passage: only `read` delivers text. A read made for a run is allowed for a
passage the run was admitted with (the evidence ref or its source version), one its own search returned,
or one of its own attachments; every read re-checks the version's state and hashes first.
"""

from __future__ import annotations

import math
import re
import time

import asyncpg

from services.assets import query
from services.assets.lifecycle import sha256_text
from services.assets.repository import AssetsRepository, ScopedAssetsRepository, index_statistics
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
# A passage scanned for a term costs about four of the index's entries read into its bitmap (measured at a
# million passages: 1.3-2.3 µs against 0.24-0.38 µs): a sample is scanned for where its expected scan is
# cheaper than its index entries and three times it is at most MAX_SCAN passages (a wrong guess's whole
# cost, about 20 ms, before the index answers after all).
SCAN_COST = 4.0
MAX_SCAN = 10_000
# How long the index's statistics are used before they are read again (they change when PostgreSQL
# analyzes the table, after a tenth or so of it has changed).
STATISTICS_SECONDS = 60.0
_LEXEME = re.compile(r"'((?:[^']|'')*)'")


def term_share(term: str, shares: dict[str, float]) -> float | None:
    """The share of passages holding `term` (a tsquery of lexemes OR'ed: a word's stems in each language and
    its exact form), taken as the sum of its lexemes' shares: their union holds at least the most common
    and at most all of them, and stems of different words often coincide ("brisa", the stem of "brisane",
    is a word of its own). None when the statistics know none of them, or for a phrase or a prefix."""
    if any(op in term for op in ("<", "&", "!", ":*")):
        return None
    known = [shares.get(lexeme.replace("''", "'"), 0.0) for lexeme in _LEXEME.findall(term)]
    return min(1.0, sum(known)) or None


def sample_scans(terms: list[str], passages: float, shares: dict[str, float], candidates: int) -> list[int | None]:
    """For each of the search's samples (each term's, then with two terms or more that of the passages
    matching every term), how many passages to scan for it (ScopedAssetsRepository.search), or None where
    the index costs less. Scanned for three times the passages that should hold `candidates` of it.

    The index reads a term's entries, as many as passages hold it; for the passages matching every term
    it walks the rarest term's entries (skipping through the others'). With every term's share known, the
    share of the passages matching all of them is taken as their product (as if the words were
    independent; words that go together only make the scan find its sample sooner)."""
    samples = [(share, share) for share in (term_share(term, shares) for term in terms)]
    if len(terms) > 1:
        known = [share for share, _ in samples if share is not None]
        every = len(known) == len(terms)
        samples.append((math.prod(known) if every else None, min(known) if every else None))
    scans: list[int | None] = []
    for share, entries in samples:
        expected = candidates / share if share else 0.0
        cheaper = share is not None and entries is not None and entries * passages > SCAN_COST * expected
        scans.append(round(3 * expected) if cheaper and 3 * expected <= MAX_SCAN else None)
    return scans


class EvidenceService:
    def __init__(self, db: Database, assets: AssetsService, repo: AssetsRepository):
        self._db = db
        self._assets = assets
        self._repo = repo
        self._statistics: tuple[float, float, dict[str, float]] = (0.0, 0.0, {})

    async def _index_statistics(self, conn: asyncpg.Connection) -> tuple[float, dict[str, float]]:
        read_at, passages, shares = self._statistics
        if time.monotonic() - read_at >= STATISTICS_SECONDS:
            passages, shares = await index_statistics(conn)
            self._statistics = (time.monotonic(), passages, shares)
        return passages, shares

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
            passages, shares = await self._index_statistics(conn)
            rows = await sources.search(
                conn,
                namespaces=namespaces,
                terms=kept,
                source_id=req.source_id,
                limit=req.limit,
                max_snippet_words=SNIPPET_WORDS,
                candidates_per_term=CANDIDATES_PER_TERM,
                scans=sample_scans(kept, passages, shares, CANDIDATES_PER_TERM),
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
        async with self._db.statement() as conn:
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
        async with self._db.statement() as conn:
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
