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
from shared.bus import RequestContext, endpoint
from shared.contracts import runhost as c
from shared.contracts.workspace import Catalog
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
    broker = runtime.broker

    runtime.on_start(blobs.ensure_bucket)
    if workers:
        worker = Worker(db=runtime.db, repo=repo, blobs=blobs, owners=owners, settings=settings)
        runtime.background(worker.run_forever)
        runtime.background(AssociationSweeper(db=runtime.db, repo=repo, owners=owners).run_forever)
    runtime.background(partial(count_runs_forever, runtime.db, repo))
    runtime.background(external.abandon_forever)

    @endpoint(broker, c.ADMIT, c.AdmitRequest, queue=NAME)
    async def admit(ctx: RequestContext, req: c.AdmitRequest) -> c.AdmitReply:
        return await service.admit(ctx.actor, req)

    @endpoint(broker, c.GET_RUN, c.RunIdRequest, queue=NAME)
    async def get_run(ctx: RequestContext, req: c.RunIdRequest) -> c.Run:
        return await service.get(ctx.actor, req.run_id)

    @endpoint(broker, c.CANCEL, c.RunIdRequest, queue=NAME)
    async def cancel(ctx: RequestContext, req: c.RunIdRequest) -> c.Run:
        return await service.cancel(ctx.actor, req.run_id)

    @endpoint(broker, c.LIST_RUNS, c.ListRunsRequest, queue=NAME)
    async def list_runs(ctx: RequestContext, req: c.ListRunsRequest) -> c.RunList:
        return await service.list_runs(ctx.actor, req)

    @endpoint(broker, c.GET_CONVERSATION, c.ConversationRequest, queue=NAME)
    async def conversation(ctx: RequestContext, req: c.ConversationRequest) -> c.Conversation:
        return await service.conversation(ctx.actor, req)

    @endpoint(broker, c.LEDGER, c.RunPageRequest, queue=NAME)
    async def ledger(ctx: RequestContext, req: c.RunPageRequest) -> c.Ledger:
        return await service.ledger(ctx.actor, req)

    @endpoint(broker, c.PROV, c.RunIdRequest, queue=NAME)
    async def prov(ctx: RequestContext, req: c.RunIdRequest) -> c.ProvDocument:
        """The run's lineage as W3C PROV-JSON."""
        return await service.prov(ctx.actor, req.run_id)

    @endpoint(broker, c.LIST_FILES, c.RunPageRequest, queue=NAME)
    async def list_files(ctx: RequestContext, req: c.RunPageRequest) -> c.FileList:
        return await service.list_files(ctx.actor, req)

    @endpoint(broker, c.READ_FILE, c.ReadFileRequest, queue=NAME)
    async def read_file(ctx: RequestContext, req: c.ReadFileRequest) -> c.FileText:
        return await service.read_file(ctx.actor, req)

    @endpoint(broker, c.WRITE_PLAN, c.WritePlanRequest, queue=NAME)
    async def write_plan(ctx: RequestContext, req: c.WritePlanRequest) -> None:
        await service.write_plan(ctx.actor, req)

    @endpoint(broker, c.EXTERNAL_CATALOG, c.LeaseRequest, queue=NAME)
    async def external_catalog(ctx: RequestContext, req: c.LeaseRequest) -> Catalog:
        """The catalog as admitted; each item recorded once as `listed`."""
        return Catalog.model_validate(await external.catalog(ctx.actor, req))

    @endpoint(broker, c.EXTERNAL_SEARCH, c.ExternalSearchRequest, queue=NAME)
    async def external_search(ctx: RequestContext, req: c.ExternalSearchRequest) -> c.ExternalSearch:
        return await external.search(ctx.actor, req)

    @endpoint(broker, c.EXTERNAL_READ, c.ExternalReadRequest, queue=NAME)
    async def external_read(ctx: RequestContext, req: c.ExternalReadRequest) -> c.ExternalRead:
        return await external.read(ctx.actor, req)

    @endpoint(broker, c.EXTERNAL_WRITE, c.ExternalWriteRequest, queue=NAME)
    async def external_write(ctx: RequestContext, req: c.ExternalWriteRequest) -> None:
        await external.write(ctx.actor, req)

    @endpoint(broker, c.EXTERNAL_RENEW, c.LeaseRequest, queue=NAME)
    async def external_renew(ctx: RequestContext, req: c.LeaseRequest) -> c.Lease:
        return await external.renew(ctx.actor, req)

    @endpoint(broker, c.EXTERNAL_FINISH, c.ExternalFinishRequest, queue=NAME)
    async def external_finish(ctx: RequestContext, req: c.ExternalFinishRequest) -> c.Run:
        return await external.finish(ctx.actor, req)

    @endpoint(broker, c.EXTERNAL_TAKE, c.TakeRequest, queue=NAME)
    async def external_take(ctx: RequestContext, req: c.TakeRequest) -> c.TakeReply:
        return await external.take(ctx.actor, req)

    return runtime
