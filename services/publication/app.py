"""The publication service built: its rules served on the bus (each rule method names its subject)."""

from __future__ import annotations

from pathlib import Path

from services.publication.service import PublicationService
from services.publication.staleness import StaleMarks
from shared.runtime import ServiceRuntime
from shared.settings import PublicationSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "publication"


def create_app(settings: PublicationSettings) -> ServiceRuntime:
    # Its SQL keeps no session state (locks are row locks inside transactions), so the pool skips the reset.
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS, session_state=False)
    service = PublicationService(runtime.db, settings)

    runtime.serve_rules(service, StaleMarks(runtime.db))

    return runtime
