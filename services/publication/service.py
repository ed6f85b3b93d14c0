"""The rules of publications: immutable hashed versions, CAS revisions, withdrawals, scoped reads."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from datetime import datetime

import asyncpg

from services.publication.repository import PublicationRepository
from services.publication.search import RunSearch
from shared.bus import RequestContext, answers
from shared.coalesce import Coalescer
from shared.contracts import publication as c
from shared.contracts.common import Actor, CheckReply, CheckRequest, Eligibility, Ref
from shared.db import Database, from_row
from shared.errors import Conflict, Invalid, NotFound, TooLarge, Unauthenticated, Unavailable
from shared.grants import verify_grant
from shared.outbox import enqueue
from shared.paging import Int32, decode_cursor, encode_cursor
from shared.proof import grant_key
from shared.settings import PublicationSettings
from shared.textdiff import line_diff


def sha256_text(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def new_publication_id() -> str:
    return f"pub_{uuid.uuid4().hex}"


def _version(row: asyncpg.Record) -> c.PublicationVersion:
    return from_row(c.PublicationVersion, row)


def _event(
    v: c.PublicationVersion,
    workspace_id: str | None,
    reason: str | None = None,
    evidence_since: datetime | None = None,
) -> c.VersionEvent:
    return c.VersionEvent(
        id=v.id,
        version=v.version,
        title=v.title,
        content_hash=v.content_hash,
        workspace_id=workspace_id,
        run_id=v.run_id,
        sources=v.sources,
        created_at=v.created_at,
        reason=reason,
        evidence_since=evidence_since,
    )


class PublicationService:
    def __init__(self, db: Database, settings: PublicationSettings, repo: PublicationRepository | None = None):
        self._db = db
        self._settings = settings
        self._grant_key = grant_key(settings)
        self._repo = repo or PublicationRepository()
        self._search = RunSearch(db, self._repo)
        # Reads that wait at the same moment share one statement; each still reads after it arrived.
        self._reads: Coalescer[tuple[str, str, int], asyncpg.Record | None] = Coalescer(c.READ, self._read_rows)

    async def _read_rows(self, keys: list[tuple[str, str, int]]) -> list[asyncpg.Record | None]:
        async with self._db.statement() as conn:
            return await self._repo.read_versions(conn, keys)

    def _check_text(self, *, title: str | None, body: str) -> None:
        size = len(body.encode("utf-8"))
        if size > self._settings.max_body_bytes:
            raise TooLarge(
                "the body is larger than the limit",
                {"field": "body", "limit": self._settings.max_body_bytes, "size": size},
            )
        if not body.strip():
            raise Invalid("the body is empty", {"field": "body"})
        if title is not None and (len(title) > self._settings.max_title_chars or not title.strip()):
            raise Invalid(
                f"the title must be 1 to {self._settings.max_title_chars} characters",
                {"field": "title", "limit": self._settings.max_title_chars},
            )

    @answers(c.COMMIT)
    async def commit(self, ctx: RequestContext, req: c.CommitRequest) -> c.PublicationVersion:
        self._check_text(title=req.title, body=req.body)
        pub_id = new_publication_id()
        sources = [s.model_dump() for s in req.sources]
        content_hash = sha256_text(req.body)
        publications = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            fresh = await publications.insert_publication(
                conn,
                id=pub_id,
                title=req.title,
                workspace_id=req.workspace_id,
                request_key=req.request_key,
            )
            if not fresh:
                assert req.request_key is not None
                return await self._replay_commit(conn, ctx.actor, req, content_hash)
            await publications.insert_version(
                conn,
                id=pub_id,
                version=1,
                title=req.title,
                body=req.body,
                content_hash=content_hash,
                sources=sources,
                run_id=req.run_id,
                claims=[claim.model_dump(mode="json") for claim in req.claims],
            )
            row = await publications.get_version(conn, id=pub_id, version=1)
            assert row is not None
            version = _version(row)
            event = _event(version, req.workspace_id, evidence_since=req.evidence_since)
            await enqueue(conn, c.EVT_COMMITTED, event, scope=ctx.actor.scope)
        return version

    async def _replay_commit(
        self, conn: asyncpg.Connection, actor: Actor, req: c.CommitRequest, content_hash: str
    ) -> c.PublicationVersion:
        """The same request_key again: the same publication if the parameters match, else a conflict."""
        publications = self._repo.for_scope(actor.scope)
        existing_id = await publications.find_by_request_key(conn, request_key=req.request_key or "")
        row = await publications.get_version(conn, id=existing_id or "", version=1)
        if row is None:
            raise Conflict("the request_key is in use", {"request_key": req.request_key})
        same = (
            row["content_hash"] == content_hash
            and row["title"] == req.title
            and row["run_id"] == req.run_id
            and row["workspace_id"] == req.workspace_id
            and row["sources"] == [s.model_dump() for s in req.sources]
        )
        if not same:
            raise Conflict(
                "the request_key was used with other parameters",
                {"request_key": req.request_key, "id": row["id"]},
            )
        return _version(row)

    @answers(c.GET)
    async def get(self, ctx: RequestContext, req: c.GetRequest) -> c.Publication:
        publications = self._repo.for_scope(ctx.actor.scope)
        async with self._db.statement() as conn:
            pub = await publications.get_publication(conn, id=req.id)
            if pub is None:
                raise NotFound("publication not found", {"id": req.id})
            page, next_cursor = await publications.list_versions(conn, id=req.id, page=req)
        versions = [c.VersionSummary.model_validate(dict(v)) for v in page]
        return from_row(c.Publication, pub, versions=versions, next_cursor=next_cursor)

    @answers(c.RUN_SEARCH)
    async def run_search(self, ctx: RequestContext, req: c.PublicationSearchRequest) -> c.PublicationSearchReply:
        if ctx.grant is None:
            raise Unauthenticated("this command needs the run's grant")
        claims = verify_grant(self._grant_key, ctx.grant, scope=ctx.actor.scope)
        return await self._search.search(ctx.actor, claims, req)

    @answers(c.READ)
    async def read(self, ctx: RequestContext, req: c.ReadRequest) -> c.PublicationVersion:
        """An exact version. With a run grant, only a ref the run was admitted with or its own search found;
        always re-checked."""
        if ctx.grant is not None:
            claims = verify_grant(self._grant_key, ctx.grant, scope=ctx.actor.scope)
            await self._search.require_readable(
                ctx.actor, claims, Ref(kind="publication", id=req.id, version=req.version)
            )
        return await self._exact_version(ctx.actor, req)

    async def _exact_version(self, actor: Actor, req: c.ReadRequest) -> c.PublicationVersion:
        """An exact version of the actor's scope, whatever a grant allows: not found, withdrawn or not intact refused."""
        row = await self._reads.load((actor.scope, req.id, req.version))
        if row is None:
            raise NotFound("publication version not found", {"id": req.id, "version": req.version})
        if row["status"] == "withdrawn":
            raise Unavailable(
                f"{req.id}@{req.version} was withdrawn",
                reason="withdrawn",
                details={"id": req.id, "version": req.version, "withdrawn_reason": row["withdrawn_reason"]},
            )
        if sha256_text(row["body"]) != row["content_hash"]:
            raise Unavailable(
                f"{req.id}@{req.version} does not match its content hash",
                reason="failed",
                details={"id": req.id, "version": req.version},
            )
        return _version(row)

    @answers(c.CLAIMS)
    async def claims(self, ctx: RequestContext, req: c.ClaimsRequest) -> c.ClaimList:
        """The checked claims of a version, under the same rules as reading it (a withdrawn one is unavailable),
        each with what has changed under it since (`stale`, see services/publication/staleness.py)."""
        version = await self._exact_version(ctx.actor, c.ReadRequest(id=req.id, version=req.version))
        # The claims are one immutable list of the version: a page is a slice after the previous page's last.
        (start,) = decode_cursor(req.cursor, Int32) if req.cursor else (0,)
        publications = self._repo.for_scope(ctx.actor.scope)
        async with self._db.statement() as conn:
            row = await publications.get_version(conn, id=version.id, version=version.version)
            assert row is not None  # it was just read
            page = row["claims"][start : start + req.limit]
            stale = await publications.claim_stale(
                conn, id=version.id, version=version.version, indexes=list(range(start, start + len(page)))
            )
        more = start + req.limit < len(row["claims"])
        return c.ClaimList(
            items=[c.Claim.model_validate({**item, "stale": stale.get(start + i)}) for i, item in enumerate(page)],
            next_cursor=encode_cursor((start + req.limit,)) if more else None,
        )

    @answers(c.DIFF)
    async def diff(self, ctx: RequestContext, req: c.DiffRequest) -> c.Diff:
        """Both versions are read under the rules of `read`: another scope's is not found, a withdrawn one unavailable."""
        old = await self._exact_version(ctx.actor, c.ReadRequest(id=req.id, version=req.from_))
        new = await self._exact_version(ctx.actor, c.ReadRequest(id=req.id, version=req.to))
        # Bodies are bounded (max_body_bytes), but a diff of two large ones is CPU work: keep it off the loop.
        hunks, truncated = await asyncio.to_thread(
            line_diff, old.body, new.body, max_lines=self._settings.max_diff_lines
        )
        return c.Diff.model_validate(
            {"id": req.id, "from": req.from_, "to": req.to, "hunks": hunks, "truncated": truncated}
        )

    @answers(c.REVISE)
    async def revise(self, ctx: RequestContext, req: c.ReviseRequest) -> c.PublicationVersion:
        self._check_text(title=req.title, body=req.body)
        publications = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            pub = await publications.lock_publication(conn, id=req.id)
            if pub is None:
                raise NotFound("publication not found", {"id": req.id})
            if pub["latest_version"] != req.expected_latest_version:
                raise Conflict(
                    "the publication has a newer version than expected",
                    {"current_latest_version": pub["latest_version"]},
                )
            version_no = pub["latest_version"] + 1
            title = req.title or pub["title"]
            await publications.insert_version(
                conn,
                id=req.id,
                version=version_no,
                title=title,
                body=req.body,
                content_hash=sha256_text(req.body),
                sources=[s.model_dump() for s in req.sources],
                run_id=req.run_id,
            )
            await publications.set_latest(conn, id=req.id, version=version_no, title=title)
            row = await publications.get_version(conn, id=req.id, version=version_no)
            assert row is not None
            version = _version(row)
            await enqueue(conn, c.EVT_REVISED, _event(version, pub["workspace_id"]), scope=ctx.actor.scope)
        return version

    @answers(c.WITHDRAW)
    async def withdraw(self, ctx: RequestContext, req: c.WithdrawRequest) -> c.PublicationVersion:
        publications = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            row = await publications.get_version(conn, id=req.id, version=req.version, for_update=True)
            if row is None:
                raise NotFound("publication version not found", {"id": req.id, "version": req.version})
            if row["status"] == "withdrawn":
                return _version(row)
            await publications.withdraw_version(conn, id=req.id, version=req.version, reason=req.reason)
            row = await publications.get_version(conn, id=req.id, version=req.version)
            assert row is not None
            version = _version(row)
            withdrawn = _event(version, row["workspace_id"], reason=req.reason)
            await enqueue(conn, c.EVT_WITHDRAWN, withdrawn, scope=ctx.actor.scope)
        return version

    @answers(c.CHECK)
    async def check(self, ctx: RequestContext, req: CheckRequest) -> CheckReply:
        """Eligibility of many refs in one query: identity, exact version, hash and state."""
        wanted = [r for r in req.refs if r.kind == "publication"]
        async with self._db.statement() as conn:
            rows = await self._repo.for_scope(ctx.actor.scope).check_versions(
                conn, ids=[r.id for r in wanted], versions=[r.version for r in wanted]
            )
        found = {row["ord"] - 1: row for row in rows}
        items: list[Eligibility] = []
        for i, ref in enumerate(wanted):
            row = found.get(i)
            if row is None:
                items.append(Eligibility(ref=ref, available=False, reason="not_found"))
                continue
            reason = None
            if row["status"] == "withdrawn":
                reason = "withdrawn"
            elif not row["intact"]:
                reason = "failed"
            items.append(
                from_row(
                    Eligibility,
                    row,
                    ref=Ref(kind="publication", id=row["id"], version=row["version"]),
                    available=reason is None,
                    reason=reason,
                )
            )
        for ref in req.refs:
            if ref.kind != "publication":
                items.append(Eligibility(ref=ref, available=False, reason="not_found"))
        return CheckReply(items=items)
