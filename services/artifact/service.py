"""The rules of artifacts: retained HTML files addressed by their hash, retention and expiry, scoped reads."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg

from services.artifact.repository import ArtifactRepository
from shared.blobs import Blobs, content_key
from shared.bus import RequestContext, answers
from shared.contracts import artifact as c
from shared.contracts.common import Actor, CheckReply, CheckRequest, Eligibility, Ref
from shared.db import Database, from_row
from shared.errors import Invalid, NotFound, TooLarge, Unavailable
from shared.outbox import enqueue
from shared.settings import ArtifactSettings


def new_artifact_id() -> str:
    return f"art_{uuid.uuid4().hex}"


def _artifact(row: asyncpg.Record) -> c.Artifact:
    return from_row(c.Artifact, row)


def _retention(row: asyncpg.Record) -> c.Retention:
    return from_row(c.Retention, row, artifact_id=row["id"], status="retained")


def _intact_reference(row: asyncpg.Record) -> bool:
    """The stored key must be the content key of the stored hash: bytes are found by what they are."""
    return bool(row["object_key"] == content_key(row["content_hash"]))


class ArtifactService:
    def __init__(self, db: Database, blobs: Blobs, settings: ArtifactSettings, repo: ArtifactRepository | None = None):
        self._db = db
        self._blobs = blobs
        self._settings = settings
        self._repo = repo or ArtifactRepository()

    @answers(c.REGISTER)
    async def register(self, ctx: RequestContext, req: c.RegisterRequest) -> c.Artifact:
        if req.size > self._settings.max_artifact_bytes:
            raise TooLarge(
                "the file is larger than the limit",
                {"field": "file", "limit": self._settings.max_artifact_bytes, "size": req.size},
            )
        title = req.title.strip()
        if not title or len(title) > self._settings.max_title_chars:
            raise Invalid(
                f"the title must be 1 to {self._settings.max_title_chars} characters",
                {"field": "title", "limit": self._settings.max_title_chars},
            )
        if req.bucket != self._blobs.bucket or req.key != content_key(req.sha256):
            raise Invalid("the bytes must be stored under their content key", {"field": "key"})
        if req.expires_at is not None and req.expires_at <= datetime.now(UTC):
            raise Invalid("expires_at must be in the future", {"field": "expires_at"})
        # The reference is recorded only for bytes that are really there.
        if not await self._blobs.exists(req.key):
            raise Invalid("no bytes are stored under that key", {"field": "key"})
        async with self._db.transaction() as conn:
            row = await self._repo.for_scope(ctx.actor.scope).insert_artifact(
                conn,
                id=new_artifact_id(),
                title=title,
                media_type=req.media_type,
                size=req.size,
                content_hash=req.sha256,
                bucket=req.bucket,
                object_key=req.key,
                expires_at=req.expires_at,
            )
            artifact = _artifact(row)
            await enqueue(conn, c.EVT_REGISTERED, artifact, scope=ctx.actor.scope)
        return artifact

    @answers(c.GET)
    async def get(self, ctx: RequestContext, req: c.ArtifactIdRequest) -> c.Artifact:
        return _artifact(await self._found(ctx.actor, req.artifact_id))

    @answers(c.OPEN)
    async def open(self, ctx: RequestContext, req: c.ArtifactIdRequest) -> c.ArtifactLocation:
        """Where the bytes are, only after scope, expiry and the hash reference have been checked."""
        row = await self._found(ctx.actor, req.artifact_id)
        if row["expired"]:
            raise Unavailable(f"artifact {req.artifact_id} has expired", {"id": req.artifact_id}, reason="expired")
        if not _intact_reference(row) or not await self._blobs.exists(row["object_key"]):
            raise Unavailable(
                f"the bytes of artifact {req.artifact_id} are missing", {"id": req.artifact_id}, reason="failed"
            )
        return c.ArtifactLocation(artifact=_artifact(row), bucket=row["bucket"], key=row["object_key"])

    async def _found(self, actor: Actor, artifact_id: str) -> asyncpg.Record:
        """The artifact's row in the actor's scope, expired or not; NotFound otherwise."""
        async with self._db.statement() as conn:
            row = await self._repo.for_scope(actor.scope).get_artifact(conn, id=artifact_id)
        if row is None:
            raise NotFound("artifact not found", {"id": artifact_id})
        return row

    @answers(c.RETAIN)
    async def retain(self, ctx: RequestContext, req: c.RetainRequest) -> c.Retention:
        artifacts = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            row = await artifacts.get_artifact(conn, id=req.artifact_id, for_update=True)
            if row is None:
                raise NotFound("artifact not found", {"id": req.artifact_id})
            if row["expired"]:
                # Its retention already ended; keeping it now would revive a file that was let go.
                raise Unavailable(f"artifact {req.artifact_id} has expired", {"id": req.artifact_id}, reason="expired")
            row = await artifacts.retain(conn, id=req.artifact_id, expires_at=req.expires_at)
            assert row is not None  # locked just above
            retention = _retention(row)
            await enqueue(conn, c.EVT_RETAINED, retention, scope=ctx.actor.scope)
        return retention

    @answers(c.CHECK)
    async def check(self, ctx: RequestContext, req: CheckRequest) -> CheckReply:
        """Eligibility of many refs in one query. An artifact has one version, 1."""
        async with self._db.statement() as conn:
            rows = await self._repo.for_scope(ctx.actor.scope).check_artifacts(conn, ids=[r.id for r in req.refs])
        found = {row["ord"] - 1: row for row in rows}
        items: list[Eligibility] = []
        for i, ref in enumerate(req.refs):
            row = found.get(i)
            if row is None or ref.kind != "artifact" or ref.version not in (None, 1):
                items.append(Eligibility(ref=ref, available=False, reason="not_found"))
                continue
            reason = "expired" if row["expired"] else None if _intact_reference(row) else "failed"
            items.append(
                from_row(
                    Eligibility,
                    row,
                    ref=Ref(kind="artifact", id=row["id"], version=1),
                    available=reason is None,
                    reason=reason,
                )
            )
        return CheckReply(items=items)
