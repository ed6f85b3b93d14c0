"""Bus edge of the artifact service: decode, call the rules, encode."""

from __future__ import annotations

from pathlib import Path

from services.artifact.service import ArtifactService
from shared.blobs import Blobs
from shared.contracts import artifact as c
from shared.runtime import ServiceRuntime
from shared.settings import ArtifactSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "artifact"


def create_app(settings: ArtifactSettings) -> ServiceRuntime:
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS)
    blobs = Blobs(settings)
    service = ArtifactService(runtime.db, blobs, settings)
    serve = runtime.serve
    # A one-shot startup task: the runtime retries it until the object store answers.
    runtime.background(blobs.ensure_bucket)

    serve(c.REGISTER, lambda ctx, req: service.register(ctx.actor, req))
    serve(c.GET, lambda ctx, req: service.get(ctx.actor, req.artifact_id))
    serve(c.OPEN, lambda ctx, req: service.open(ctx.actor, req.artifact_id))
    serve(c.RETAIN, lambda ctx, req: service.retain(ctx.actor, req))
    serve(c.CHECK, lambda ctx, req: service.check(ctx.actor, req.refs))

    return runtime
