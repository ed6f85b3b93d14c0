"""The assets service built: its rules served on the bus, plus the sandbox and recovery loops."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import get_args

from services.assets.contents import SourceContents
from services.assets.eligibility import SourceChecks
from services.assets.evidence import EvidenceService
from services.assets.extract.base import Limits
from services.assets.import_threads import ImportThreads
from services.assets.lifecycle import Lifecycle
from services.assets.repository import AssetsMaintenance, AssetsRepository
from services.assets.sandbox import Sandbox
from services.assets.service import AssetsService
from shared.blobs import Blobs
from shared.contracts.assets import ExtractionStatus, Kind
from shared.metrics import EXTRACTION_FAILURES, EXTRACTION_SECONDS, from_zero
from shared.runtime import ServiceRuntime
from shared.settings import AssetsSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "assets"


class AssetsRuntime(ServiceRuntime):
    """The common runtime, plus the object-store bucket at start and the warm sandbox at stop."""

    def __init__(self, settings: AssetsSettings, blobs: Blobs, sandbox: Sandbox, imports: ImportThreads):
        super().__init__(NAME, settings, MIGRATIONS)
        self.blobs = blobs
        self.sandbox = sandbox
        self.imports = imports
        self.lifecycle: Lifecycle | None = None

    async def start(self) -> None:
        await self.blobs.ensure_bucket()
        self.sandbox.start()
        await super().start()

    def health_problem(self) -> str | None:
        problems = [self.imports.problem()]
        if self.sandbox.problem is not None:
            problems.insert(0, f"parsing is refused: {self.sandbox.problem}")
        return "; ".join(p for p in problems if p) or None

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
    imports = ImportThreads(
        threads=settings.import_threads, per_scope=settings.import_threads_per_scope, seconds=settings.import_seconds
    )
    runtime = AssetsRuntime(settings, Blobs(settings), create_sandbox(settings), imports)
    from_zero(EXTRACTION_FAILURES, get_args(Kind))
    from_zero(EXTRACTION_SECONDS, get_args(Kind), get_args(ExtractionStatus))
    repo = AssetsRepository()
    # Extraction and its recovery sweep reach a version whatever its scope; everything else is scoped.
    lifecycle = Lifecycle(runtime.db, runtime.sandbox, settings, AssetsMaintenance())
    runtime.lifecycle = lifecycle
    service = AssetsService(runtime.db, runtime.blobs, lifecycle, settings, repo, imports)
    evidence = EvidenceService(runtime.db, service, repo)
    contents = SourceContents(runtime.db, repo)
    runtime.background(lambda: lifecycle.sweep_forever(service.stage_again))

    runtime.serve_rules(service, evidence, contents, SourceChecks(runtime.db, repo))

    return runtime
