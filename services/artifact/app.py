"""Bus edge of the artifact service: decode, call the rules, encode."""

from __future__ import annotations

from pathlib import Path

from services.artifact.service import ArtifactService
from shared.blobs import Blobs
from shared.bus import RequestContext, endpoint
from shared.contracts import artifact as c
from shared.contracts.common import CheckReply, CheckRequest
from shared.runtime import ServiceRuntime
from shared.settings import ArtifactSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "artifact"


def create_app(settings: ArtifactSettings) -> ServiceRuntime:
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS)
    blobs = Blobs(settings)
    service = ArtifactService(runtime.db, blobs, settings)
    broker = runtime.broker
    # A one-shot startup task: the runtime retries it until the object store answers.
    runtime.background(blobs.ensure_bucket)

    @endpoint(broker, c.REGISTER, c.RegisterRequest, queue=NAME)
    async def register(ctx: RequestContext, req: c.RegisterRequest) -> c.Artifact:
        return await service.register(ctx.actor, req)

    @endpoint(broker, c.GET, c.ArtifactIdRequest, queue=NAME)
    async def get(ctx: RequestContext, req: c.ArtifactIdRequest) -> c.Artifact:
        return await service.get(ctx.actor, req.artifact_id)

    @endpoint(broker, c.OPEN, c.ArtifactIdRequest, queue=NAME)
    async def open_(ctx: RequestContext, req: c.ArtifactIdRequest) -> c.ArtifactLocation:
        return await service.open(ctx.actor, req.artifact_id)

    @endpoint(broker, c.RETAIN, c.RetainRequest, queue=NAME)
    async def retain(ctx: RequestContext, req: c.RetainRequest) -> c.Retention:
        return await service.retain(ctx.actor, req)

    @endpoint(broker, c.CHECK, CheckRequest, queue=NAME)
    async def check(ctx: RequestContext, req: CheckRequest) -> CheckReply:
        return await service.check(ctx.actor, req.refs)

    return runtime
