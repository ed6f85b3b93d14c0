"""Bus edge of the assets service: decode, call the rules, encode; plus the sandbox and recovery loops."""

from __future__ import annotations

from dataclasses import fields
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
from shared.contracts import assets as c
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


def limits_of(settings: AssetsSettings) -> Limits:
    return Limits(**{limit.name: getattr(settings, limit.name) for limit in fields(Limits)})


def create_sandbox(settings: AssetsSettings) -> Sandbox:
    return Sandbox(
        limits_of(settings),
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
    serve = runtime.serve
    runtime.background(lambda: lifecycle.sweep_forever(service.stage_again))

    serve(c.UPLOAD, lambda ctx, req: service.upload(ctx.actor, req))
    serve(c.IMPORT, lambda ctx, req: service.import_file(ctx.actor, req))
    serve(c.ATTACH, lambda ctx, req: service.attach(ctx.actor, req, grant=ctx.grant))
    serve(c.PROMOTE, lambda ctx, req: service.promote(ctx.actor, req, grant=ctx.grant))
    serve(c.GET_SOURCE, lambda ctx, req: service.get_source(ctx.actor, req, grant=ctx.grant))
    serve(c.GET_ASSET, lambda ctx, req: service.get_asset(ctx.actor, req, grant=ctx.grant))
    serve(c.RETIRE, lambda ctx, req: service.retire(ctx.actor, req))
    serve(c.CHECK, lambda ctx, req: check_sources(runtime.db, repo, ctx.actor, req.refs))
    serve(c.SEARCH, lambda ctx, req: evidence.search(ctx.actor, req, grant=ctx.grant))
    serve(c.READ, lambda ctx, req: evidence.read(ctx.actor, req, grant=ctx.grant))
    serve(c.PASSAGES, lambda ctx, req: contents.passages(ctx.actor, req))
    serve(c.ORIGINAL, lambda ctx, req: contents.original(ctx.actor, req))
    serve(c.LOCATE, lambda ctx, req: evidence.locate(ctx.actor, req))

    return runtime
