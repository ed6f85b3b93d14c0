"""A source version as a person reads it: its extracted passages in document order, and its original file.

The passages follow the rules of reading one passage (`EvidenceService.read`): only an active version of an
intact row, every passage's text matching its hash. The original is offered for any settled version whose
source is not retired: a superseded or failed version's bytes still say what was uploaded.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from services.assets.lifecycle import sha256_text
from services.assets.repository import AssetsRepository
from shared.bus import RequestContext, answers
from shared.contracts import assets as c
from shared.contracts.common import Actor
from shared.db import Database, from_row
from shared.errors import NotFound, Unavailable


class SourceContents:
    def __init__(self, db: Database, repo: AssetsRepository):
        self._db = db
        self._repo = repo

    async def _version(self, conn: asyncpg.Connection, actor: Actor, req: c.VersionRequest) -> asyncpg.Record:
        row = await self._repo.for_scope(actor.scope).find_version(conn, source_id=req.source_id, version=req.version)
        where: dict[str, Any] = {"source_id": req.source_id, "version": req.version}
        if row is None:
            raise NotFound("source version not found", where)
        if row["source_status"] == "retired" or row["status"] == "retired":
            raise Unavailable(f"the source {req.source_id} is retired", where, reason="retired")
        if not row["intact"]:
            raise Unavailable("the version does not match its recorded identity", where, reason="failed")
        return row

    @answers(c.PASSAGES)
    async def passages(self, ctx: RequestContext, req: c.PassagesRequest) -> c.PassageList:
        async with self._db.statement() as conn:
            row = await self._version(conn, ctx.actor, req)
            if row["status"] != "active":
                where = {"source_id": req.source_id, "version": req.version}
                raise Unavailable(f"version {req.version} is {row['status']}", where, reason=row["status"])
            page, next_cursor = await self._repo.for_scope(ctx.actor.scope).page_passages(
                conn, asset_id=row["asset_id"], page=req
            )
        for passage in page:
            if sha256_text(passage["text"]) != passage["text_hash"]:
                where = {"source_id": req.source_id, "version": req.version, "locator": passage["locator"]}
                raise Unavailable("a passage does not match its recorded hash", where, reason="failed")
        return c.PassageList(items=[from_row(c.Passage, p) for p in page], next_cursor=next_cursor)

    @answers(c.ORIGINAL)
    async def original(self, ctx: RequestContext, req: c.VersionRequest) -> c.Original:
        async with self._db.statement() as conn:
            row = await self._version(conn, ctx.actor, req)
        if row["status"] in ("registered", "extracting"):
            raise NotFound("the version is not settled yet", {"source_id": req.source_id, "version": req.version})
        return from_row(c.Original, row, bucket=row["blob_bucket"], key=row["blob_key"], sha256=row["content_hash"])
