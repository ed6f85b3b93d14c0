"""The artifact service built: its rules served on the bus (each rule method names its subject)."""

from __future__ import annotations

from pathlib import Path

from services.artifact.service import ArtifactService
from shared.blobs import Blobs
from shared.runtime import ServiceRuntime
from shared.settings import ArtifactSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "artifact"


def create_app(settings: ArtifactSettings) -> ServiceRuntime:
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS)
    blobs = Blobs(settings)
    service = ArtifactService(runtime.db, blobs, settings)
    # A one-shot startup task: the runtime retries it until the object store answers.
    runtime.background(blobs.ensure_bucket)

    runtime.serve_rules(service)

    return runtime
