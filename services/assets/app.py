"""Bus edge of the assets service: decode, call the rules, encode; plus the sandbox and recovery loops."""

from __future__ import annotations

from pathlib import Path

from services.assets.contents import SourceContents
from services.assets.eligibility import check_sources
from services.assets.evidence import EvidenceService
from services.assets.extract.base import Limits
from services.assets.lifecycle import Lifecycle
from services.assets.repository import AssetsRepository
from services.assets.sandbox import Sandbox
from services.assets.service import AssetsService
from shared.blobs import Blobs
from shared.bus import RequestContext, endpoint
from shared.contracts import assets as c
from shared.contracts.common import CheckReply, CheckRequest
from shared.runtime import ServiceRuntime
from shared.settings import AssetsSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "assets"


class AssetsRuntime(ServiceRuntime):
    """The common runtime, plus the object-store bucket at start and the warm sandbox at stop."""

    def __init__(self, settings: AssetsSettings, blobs: Blobs, sandbox: Sandbox):
        super().__init__(NAME, settings, MIGRATIONS)
        self.blobs = blobs
        self.sandbox = sandbox
        self.lifecycle: Lifecycle | None = None

    async def start(self) -> None:
        await self.blobs.ensure_bucket()
        self.sandbox.start()
        await super().start()

    def health_problem(self) -> str | None:
        problem = self.sandbox.problem
        return None if problem is None else f"parsing is refused: {problem}"

    async def stop(self) -> None:
        await super().stop()
        if self.lifecycle is not None:
            await self.lifecycle.claims.close()
        await self.sandbox.close()


def create_sandbox(settings: AssetsSettings) -> Sandbox:
    limits = Limits(
        max_parts=settings.max_parts,
        max_passages=settings.max_passages,
        max_passage_chars=settings.max_passage_chars,
        max_text_chars=settings.max_text_chars,
        max_zip_entries=settings.max_zip_entries,
        max_zip_entry_bytes=settings.max_zip_entry_bytes,
        max_zip_total_bytes=settings.max_zip_total_bytes,
        max_zip_ratio=settings.max_zip_ratio,
        ocr_max_pages=settings.ocr_max_pages,
        ocr_seconds=settings.ocr_seconds,
        ocr_dpi=settings.ocr_dpi,
    )
    return Sandbox(
        limits,
        cpu_seconds=settings.parse_cpu_seconds,
        memory_bytes=settings.parse_memory_bytes,
        wall_seconds=settings.parse_wall_seconds,
        ocr_memory_bytes=settings.ocr_memory_bytes,
        split_pages=settings.extract_split_pages,
        split_width=settings.extract_concurrency,
    )


def create_app(settings: AssetsSettings) -> AssetsRuntime:
    runtime = AssetsRuntime(settings, Blobs(settings), create_sandbox(settings))
    repo = AssetsRepository()
    lifecycle = Lifecycle(runtime.db, runtime.sandbox, settings, repo)
    runtime.lifecycle = lifecycle
    service = AssetsService(runtime.db, runtime.blobs, lifecycle, settings, repo)
    evidence = EvidenceService(runtime.db, service, repo)
    contents = SourceContents(runtime.db, repo)
    broker = runtime.broker
    runtime.background(lambda: lifecycle.sweep_forever(service.stage_again))

    @endpoint(broker, c.UPLOAD, c.UploadRequest, queue=NAME)
    async def upload(ctx: RequestContext, req: c.UploadRequest) -> c.AssetVersion:
        return await service.upload(ctx.actor, req)

    @endpoint(broker, c.IMPORT, c.ImportRequest, queue=NAME)
    async def import_file(ctx: RequestContext, req: c.ImportRequest) -> c.AssetVersion:
        return await service.import_file(ctx.actor, req)

    @endpoint(broker, c.ATTACH, c.AttachRequest, queue=NAME)
    async def attach(ctx: RequestContext, req: c.AttachRequest) -> c.AssetVersion:
        return await service.attach(ctx.actor, req, grant=ctx.grant)

    @endpoint(broker, c.PROMOTE, c.PromoteRequest, queue=NAME)
    async def promote(ctx: RequestContext, req: c.PromoteRequest) -> c.AssetVersion:
        return await service.promote(ctx.actor, req, grant=ctx.grant)

    @endpoint(broker, c.GET_SOURCE, c.GetSourceRequest, queue=NAME)
    async def get_source(ctx: RequestContext, req: c.GetSourceRequest) -> c.Source:
        return await service.get_source(ctx.actor, req, grant=ctx.grant)

    @endpoint(broker, c.GET_ASSET, c.GetAssetRequest, queue=NAME)
    async def get_asset(ctx: RequestContext, req: c.GetAssetRequest) -> c.AssetVersion:
        return await service.get_asset(ctx.actor, req, grant=ctx.grant)

    @endpoint(broker, c.RETIRE, c.RetireRequest, queue=NAME)
    async def retire(ctx: RequestContext, req: c.RetireRequest) -> c.Source:
        return await service.retire(ctx.actor, req)

    @endpoint(broker, c.CHECK, CheckRequest, queue=NAME)
    async def check(ctx: RequestContext, req: CheckRequest) -> CheckReply:
        return await check_sources(runtime.db, repo, ctx.actor, req.refs)

    @endpoint(broker, c.SEARCH, c.SearchRequest, queue=NAME)
    async def search(ctx: RequestContext, req: c.SearchRequest) -> c.SearchReply:
        return await evidence.search(ctx.actor, req, grant=ctx.grant)

    @endpoint(broker, c.READ, c.EvidenceReadRequest, queue=NAME)
    async def read(ctx: RequestContext, req: c.EvidenceReadRequest) -> c.Evidence:
        return await evidence.read(ctx.actor, req, grant=ctx.grant)

    @endpoint(broker, c.PASSAGES, c.PassagesRequest, queue=NAME)
    async def passages(ctx: RequestContext, req: c.PassagesRequest) -> c.PassageList:
        return await contents.passages(ctx.actor, req)

    @endpoint(broker, c.ORIGINAL, c.VersionRequest, queue=NAME)
    async def original(ctx: RequestContext, req: c.VersionRequest) -> c.Original:
        return await contents.original(ctx.actor, req)

    @endpoint(broker, c.LOCATE, c.LocateRequest, queue=NAME)
    async def locate(ctx: RequestContext, req: c.LocateRequest) -> c.Evidence:
        return await evidence.locate(ctx.actor, req)

    return runtime
