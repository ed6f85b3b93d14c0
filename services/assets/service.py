"""The rules of assets: three acquisition paths, versioned identity, retirement, eligibility.

Acquisition stages verified bytes, refuses what is empty, too large or of an unknown kind before anything
is recorded, then registers the version under the source's row lock: identical bytes under the same source
(the same identity key) answer the existing version with `reused: true`. A new version is extracted and
settled by `Lifecycle`.
"""

from __future__ import annotations

import hashlib
import uuid

import asyncpg

from services.assets.acquisition import StagedFile, import_base, parse_roots, roots_of, stage_blob, stage_import
from services.assets.import_threads import ImportThreads
from services.assets.kinds import sniff
from services.assets.lifecycle import SETTLED, Lifecycle, evidence_prefix
from services.assets.repository import AssetsRepository
from shared.blobs import Blobs, content_key
from shared.bus import RequestContext, answers
from shared.contracts import assets as c
from shared.contracts.common import Actor, PageRequest
from shared.db import Database, from_row
from shared.errors import Invalid, NotFound, Unauthenticated, Unavailable, Unsupported
from shared.grants import GrantClaims, verify_grant
from shared.outbox import enqueue
from shared.proof import grant_key
from shared.settings import AssetsSettings

UPLOAD_ROOT = "upload"


def identity_key(scope: str, root: str, source_id: str, content_hash: str) -> str:
    return hashlib.sha256(f"{scope}|{root}|{source_id}|{content_hash}".encode()).hexdigest()


def new_asset_id() -> str:
    return f"ast_{uuid.uuid4().hex}"


def run_namespace(run_id: str) -> str:
    return f"run:{run_id}"


def to_version(row: asyncpg.Record, *, reused: bool = False) -> c.AssetVersion:
    return from_row(
        c.AssetVersion, row, reused=reused, extraction=row["extraction"] or None, run_local=row["namespace"] != ""
    )


class AssetsService:
    def __init__(
        self,
        db: Database,
        blobs: Blobs,
        lifecycle: Lifecycle,
        settings: AssetsSettings,
        repo: AssetsRepository,
        imports: ImportThreads,
    ):
        self._db = db
        self._imports = imports
        self._blobs = blobs
        self._lifecycle = lifecycle
        self._settings = settings
        self._repo = repo
        self._roots = parse_roots(settings.approved_roots)
        self._grant_key = grant_key(settings)

    # -- grants --------------------------------------------------------------------------------------

    def claims(self, actor: Actor, grant: str | None, *, required: bool = False) -> GrantClaims | None:
        if grant is None:
            if required:
                raise Unauthenticated("this command needs the run's grant")
            return None
        return verify_grant(self._grant_key, grant, scope=actor.scope)

    # -- acquisition ---------------------------------------------------------------------------------

    def _kind_of(self, staged: StagedFile) -> c.Kind:
        if staged.size == 0:
            raise Invalid("the file is empty", {"field": "file"})
        kind = sniff(staged.path, max_zip_entries=self._settings.max_zip_entries)
        if kind is None:
            raise Unsupported(
                "the file is not a supported type (PDF, DOCX, XLSX, HTML or UTF-8 text)", {"field": "file"}
            )
        return kind

    @answers(c.UPLOAD)
    async def upload(self, ctx: RequestContext, req: c.UploadRequest) -> c.AssetVersion:
        staged = await stage_blob(self._blobs, req.blob, max_bytes=self._settings.max_upload_bytes)
        try:
            kind = self._kind_of(staged)
            return await self._register(
                ctx.actor, "", UPLOAD_ROOT, req.source_id, staged, kind, req.blob, req.filename, req.workspace_id, None
            )
        finally:
            staged.discard()

    @answers(c.IMPORT)
    async def import_file(self, ctx: RequestContext, req: c.ImportRequest) -> c.AssetVersion:
        base = import_base(roots_of(self._roots, ctx.actor.scope), req.root, req.path)

        def read(deadline: float) -> StagedFile:
            return stage_import(base, req.root, req.path, max_bytes=self._settings.max_upload_bytes, deadline=deadline)

        # On an import thread: every step touches the root's file system, which may hang.
        staged = await self._imports.run(ctx.actor.scope, read)
        try:
            kind = self._kind_of(staged)
            key = content_key(staged.sha256)
            # Written every time: bytes found under the key were not necessarily written by us.
            await self._blobs.put_file(key, str(staged.path))
            blob = c.BlobRef(bucket=self._blobs.bucket, key=key, sha256=staged.sha256, size=staged.size)
            root = f"import:{req.root}"
            return await self._register(
                ctx.actor, "", root, req.source_id, staged, kind, blob, staged.name, req.workspace_id, None
            )
        finally:
            staged.discard()

    @answers(c.ATTACH)
    async def attach(self, ctx: RequestContext, req: c.AttachRequest) -> c.AssetVersion:
        claims = self.claims(ctx.actor, ctx.grant, required=True)
        assert claims is not None
        if "|" in claims.run_id:
            raise Invalid("the run id cannot name a namespace", {"field": "grant"})
        staged = await stage_blob(self._blobs, req.blob, max_bytes=self._settings.max_upload_bytes)
        try:
            kind = self._kind_of(staged)
            space = run_namespace(claims.run_id)
            return await self._register(
                ctx.actor, space, space, req.source_id, staged, kind, req.blob, req.filename, None, claims.run_id
            )
        finally:
            staged.discard()

    async def _register(
        self,
        actor: Actor,
        namespace: str,
        root: str,
        source_id: str,
        staged: StagedFile,
        kind: c.Kind,
        blob: c.BlobRef,
        filename: str | None,
        workspace_id: str | None,
        run_id: str | None,
    ) -> c.AssetVersion:
        identity = identity_key(actor.scope, root, source_id, staged.sha256)
        asset_id = new_asset_id()
        sources = self._repo.for_scope(actor.scope)
        # Claimed before the row exists, so the recovery sweep never takes a version that waits its turn.
        await self._lifecycle.claims.hold(asset_id)
        try:
            async with self._db.transaction() as conn:
                source = await sources.lock_or_create_source(conn, namespace=namespace, source_id=source_id)
                if source["status"] == "retired":
                    raise Unavailable(f"the source {source_id} is retired", {"source_id": source_id}, reason="retired")
                existing = await sources.find_by_identity(conn, identity_key=identity)
                if existing is None:
                    inserted = await sources.insert_version(
                        conn,
                        source_pk=source["pk"],
                        id=asset_id,
                        identity_key=identity,
                        root=root,
                        content_hash=staged.sha256,
                        size=staged.size,
                        kind=kind,
                        filename=filename,
                        blob_bucket=blob.bucket,
                        blob_key=blob.key,
                        run_id=run_id,
                    )
                    assert inserted is not None  # the source was locked in this scope just above
                    version = inserted
                else:
                    version = existing["version"]
                if workspace_id is not None:
                    await self._request_association(
                        conn, actor, workspace_id, source_id, existing["asset_id"] if existing else asset_id, version
                    )
            if existing is None:
                # No connection is held from here until this scope's turn at a parser slot comes.
                return to_version(await self._lifecycle.ingest_when_free(asset_id, actor.scope, staged.path))
        finally:
            await self._lifecycle.claims.let_go(asset_id)
        # A reused version that another request is still ingesting: wait without holding a connection.
        if existing["status"] not in SETTLED:
            existing = await self._lifecycle.wait_settled(existing["asset_id"])
        return to_version(existing, reused=True)

    async def _request_association(
        self, conn: asyncpg.Connection, actor: Actor, workspace_id: str, source_id: str, asset_id: str, version: int
    ) -> None:
        event = c.AssociationRequested(
            workspace_id=workspace_id, source_id=source_id, asset_id=asset_id, version=version
        )
        await enqueue(conn, c.EVT_ASSOCIATION_REQUESTED, event, scope=actor.scope)

    async def stage_again(self, row: asyncpg.Record) -> StagedFile:
        """The bytes of a recorded version, for re-extraction after a crash (verified against its hash)."""
        blob = c.BlobRef(bucket=row["blob_bucket"], key=row["blob_key"], sha256=row["content_hash"], size=row["size"])
        return await stage_blob(self._blobs, blob, max_bytes=max(row["size"], self._settings.max_upload_bytes))

    @answers(c.PROMOTE)
    async def promote(self, ctx: RequestContext, req: c.PromoteRequest) -> c.AssetVersion:
        """A run's attachment becomes a version of a source of the scope, with the same bytes and passages."""
        claims = self.claims(ctx.actor, ctx.grant, required=True)
        assert claims is not None
        sources = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            attachment = await sources.get_version(conn, asset_id=req.asset_id)
            if attachment is None or attachment["namespace"] != run_namespace(claims.run_id):
                raise NotFound("attachment not found", {"asset_id": req.asset_id})
            if attachment["status"] != "active":
                raise Unavailable(
                    f"the attachment is {attachment['status']}", {"asset_id": req.asset_id}, reason=attachment["status"]
                )
            source_id = req.source_id or attachment["source_id"]
            identity = identity_key(ctx.actor.scope, attachment["root"], source_id, attachment["content_hash"])
            source = await sources.lock_or_create_source(conn, namespace="", source_id=source_id)
            if source["status"] == "retired":
                raise Unavailable(f"the source {source_id} is retired", {"source_id": source_id}, reason="retired")
            existing = await sources.find_by_identity(conn, identity_key=identity)
            if existing is not None:
                row, reused = existing, True
            else:
                asset_id = new_asset_id()
                await sources.insert_version(
                    conn,
                    source_pk=source["pk"],
                    id=asset_id,
                    identity_key=identity,
                    root=attachment["root"],
                    content_hash=attachment["content_hash"],
                    size=attachment["size"],
                    kind=attachment["kind"],
                    filename=attachment["filename"],
                    blob_bucket=attachment["blob_bucket"],
                    blob_key=attachment["blob_key"],
                    run_id=claims.run_id,
                    promoted_from=attachment["asset_id"],
                )
                await sources.copy_evidence(
                    conn, from_asset=attachment["asset_id"], to_asset=asset_id, prefix=evidence_prefix(asset_id)
                )
                fresh = await sources.get_version(conn, asset_id=asset_id)
                assert fresh is not None
                await self._lifecycle.activate(conn, fresh, attachment["extraction"])
                row, reused = await sources.get_version(conn, asset_id=asset_id), False
            assert row is not None
            if req.workspace_id is not None:
                await self._request_association(
                    conn, ctx.actor, req.workspace_id, source_id, row["asset_id"], row["version"]
                )
        return to_version(row, reused=reused)

    # -- reads ---------------------------------------------------------------------------------------

    def _visible(self, row: asyncpg.Record | None, claims: GrantClaims | None) -> bool:
        """The scope's catalog is visible in the scope; a run's attachments only with that run's grant."""
        if row is None:
            return False
        return row["namespace"] == "" or (claims is not None and row["namespace"] == run_namespace(claims.run_id))

    @answers(c.GET_ASSET)
    async def get_asset(self, ctx: RequestContext, req: c.GetAssetRequest) -> c.AssetVersion:
        claims = self.claims(ctx.actor, ctx.grant)
        async with self._db.statement() as conn:
            row = await self._repo.for_scope(ctx.actor.scope).get_version(conn, asset_id=req.asset_id)
        if row is None or not self._visible(row, claims):
            raise NotFound("asset not found", {"asset_id": req.asset_id})
        return to_version(row)

    @answers(c.GET_SOURCE)
    async def get_source(self, ctx: RequestContext, req: c.GetSourceRequest) -> c.Source:
        claims = self.claims(ctx.actor, ctx.grant, required=req.run_local)
        namespace = run_namespace(claims.run_id) if req.run_local and claims else ""
        async with self._db.statement() as conn:
            return await self._source_view(conn, ctx.actor, namespace, req.source_id, req)

    async def _source_view(
        self, conn: asyncpg.Connection, actor: Actor, namespace: str, source_id: str, page: PageRequest
    ) -> c.Source:
        """The source with one page of its versions (oldest first)."""
        sources = self._repo.for_scope(actor.scope)
        source = await sources.find_source(conn, namespace=namespace, source_id=source_id)
        if source is None:
            raise NotFound("source not found", {"source_id": source_id})
        active = await sources.active_version(conn, source_pk=source["pk"])
        versions, next_cursor = await sources.list_versions(conn, source_pk=source["pk"], page=page)
        return c.Source(
            source_id=source_id,
            active_version=active["version"] if active is not None else None,
            versions=[to_version(r) for r in versions],
            next_cursor=next_cursor,
        )

    @answers(c.RETIRE)
    async def retire(self, ctx: RequestContext, req: c.RetireRequest) -> c.Source:
        sources = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            source = await sources.find_source(conn, namespace="", source_id=req.source_id, for_update=True)
            if source is None:
                raise NotFound("source not found", {"source_id": req.source_id})
            if source["status"] != "retired":
                versions = await sources.retire_source(conn, pk=source["pk"])
                event = c.SourceRetired(source_id=req.source_id, versions=versions)
                await enqueue(conn, c.EVT_SOURCE_RETIRED, event, scope=ctx.actor.scope)
            return await self._source_view(conn, ctx.actor, "", req.source_id, PageRequest())
