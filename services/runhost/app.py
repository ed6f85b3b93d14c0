"""Bus edge of runhost: decode, call the rules, encode; plus the lease workers."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from services.runhost.external import ExternalRuns
from services.runhost.gauges import count_runs_forever
from services.runhost.memory import RunFiles
from services.runhost.owners import Owners
from services.runhost.repository import RunRepository
from services.runhost.service import RunService
from services.runhost.sweeper import AssociationSweeper
from services.runhost.worker import Worker
from shared.blobs import Blobs
from shared.contracts import runhost as c
from shared.runtime import ServiceRuntime
from shared.settings import RunhostSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "runhost"


def create_app(settings: RunhostSettings, *, workers: bool = True) -> ServiceRuntime:
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS)
    repo = RunRepository()
    blobs = Blobs(settings)

    # The bus client exists only once the runtime has connected, hence a provider.
    owners = Owners(lambda: runtime.bus)

    def files_for(run_id: str, epoch: int | None) -> RunFiles:
        return RunFiles(blobs, runtime.db, repo, run_id, epoch)

    service = RunService(runtime.db, owners, files_for, settings, repo)
    external = ExternalRuns(
        db=runtime.db, repo=repo, blobs=blobs, owners=owners, settings=settings, files_for=files_for
    )
    service.external = external
    serve = runtime.serve

    runtime.on_start(blobs.ensure_bucket)
    if workers:
        worker = Worker(db=runtime.db, repo=repo, blobs=blobs, owners=owners, settings=settings)
        runtime.background(worker.run_forever)
        runtime.background(AssociationSweeper(db=runtime.db, repo=repo, owners=owners).run_forever)
    runtime.background(partial(count_runs_forever, runtime.db, repo))
    runtime.background(external.abandon_forever)

    serve(c.ADMIT, lambda ctx, req: service.admit(ctx.actor, req))

    serve(c.GET_RUN, lambda ctx, req: service.get(ctx.actor, req.run_id))

    serve(c.CANCEL, lambda ctx, req: service.cancel(ctx.actor, req.run_id))

    serve(c.LIST_RUNS, lambda ctx, req: service.list_runs(ctx.actor, req))

    serve(c.GET_CONVERSATION, lambda ctx, req: service.conversation(ctx.actor, req))

    serve(c.LEDGER, lambda ctx, req: service.ledger(ctx.actor, req))

    serve(c.PROV, lambda ctx, req: service.prov(ctx.actor, req.run_id))

    serve(c.LIST_FILES, lambda ctx, req: service.list_files(ctx.actor, req))

    serve(c.READ_FILE, lambda ctx, req: service.read_file(ctx.actor, req))

    serve(c.WRITE_PLAN, lambda ctx, req: service.write_plan(ctx.actor, req))

    serve(c.EXTERNAL_SEARCH, lambda ctx, req: external.search(ctx.actor, req))

    serve(c.EXTERNAL_READ, lambda ctx, req: external.read(ctx.actor, req))

    serve(c.EXTERNAL_CATALOG, lambda ctx, req: external.catalog(ctx.actor, req))

    serve(c.EXTERNAL_WRITE, lambda ctx, req: external.write(ctx.actor, req))

    serve(c.EXTERNAL_RENEW, lambda ctx, req: external.renew(ctx.actor, req))

    serve(c.EXTERNAL_FINISH, lambda ctx, req: external.finish(ctx.actor, req))

    serve(c.EXTERNAL_TAKE, lambda ctx, req: external.take(ctx.actor, req))

    return runtime
