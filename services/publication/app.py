"""Bus edge of the publication service: decode, call the rules, encode."""

from __future__ import annotations

from pathlib import Path

from services.publication.service import PublicationService
from shared.contracts import publication as c
from shared.runtime import ServiceRuntime
from shared.settings import PublicationSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "publication"


def create_app(settings: PublicationSettings) -> ServiceRuntime:
    # Its SQL keeps no session state (locks are row locks inside transactions), so the pool skips the reset.
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS, session_state=False)
    service = PublicationService(runtime.db, settings)
    serve = runtime.serve

    serve(c.COMMIT, lambda ctx, req: service.commit(ctx.actor, req))
    serve(c.GET, lambda ctx, req: service.get(ctx.actor, req))
    serve(c.READ, lambda ctx, req: service.read(ctx.actor, req, grant=ctx.grant))
    serve(c.RUN_SEARCH, lambda ctx, req: service.run_search(ctx.actor, req, grant=ctx.grant))
    serve(c.CLAIMS, lambda ctx, req: service.claims(ctx.actor, req))
    serve(c.REVISE, lambda ctx, req: service.revise(ctx.actor, req))
    serve(c.WITHDRAW, lambda ctx, req: service.withdraw(ctx.actor, req))
    serve(c.DIFF, lambda ctx, req: service.diff(ctx.actor, req))
    serve(c.CHECK, lambda ctx, req: service.check(ctx.actor, req.refs))

    return runtime
