"""Bus edge of the publication service: decode, call the rules, encode."""

from __future__ import annotations

from pathlib import Path

from services.publication.service import PublicationService
from shared.bus import RequestContext, endpoint
from shared.contracts import publication as c
from shared.contracts.common import CheckReply, CheckRequest
from shared.runtime import ServiceRuntime
from shared.settings import PublicationSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "publication"


def create_app(settings: PublicationSettings) -> ServiceRuntime:
    # Its SQL keeps no session state (locks are row locks inside transactions), so the pool skips the reset.
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS, session_state=False)
    service = PublicationService(runtime.db, settings)
    broker = runtime.broker

    @endpoint(broker, c.COMMIT, c.CommitRequest, queue=NAME)
    async def commit(ctx: RequestContext, req: c.CommitRequest) -> c.PublicationVersion:
        return await service.commit(ctx.actor, req)

    @endpoint(broker, c.GET, c.GetRequest, queue=NAME)
    async def get(ctx: RequestContext, req: c.GetRequest) -> c.Publication:
        return await service.get(ctx.actor, req)

    @endpoint(broker, c.READ, c.ReadRequest, queue=NAME)
    async def read(ctx: RequestContext, req: c.ReadRequest) -> c.PublicationVersion:
        return await service.read(ctx.actor, req, grant=ctx.grant)

    @endpoint(broker, c.RUN_SEARCH, c.PublicationSearchRequest, queue=NAME)
    async def run_search(ctx: RequestContext, req: c.PublicationSearchRequest) -> c.PublicationSearchReply:
        return await service.run_search(ctx.actor, req, grant=ctx.grant)

    @endpoint(broker, c.CLAIMS, c.ClaimsRequest, queue=NAME)
    async def claims(ctx: RequestContext, req: c.ClaimsRequest) -> c.ClaimList:
        return await service.claims(ctx.actor, req)

    @endpoint(broker, c.REVISE, c.ReviseRequest, queue=NAME)
    async def revise(ctx: RequestContext, req: c.ReviseRequest) -> c.PublicationVersion:
        return await service.revise(ctx.actor, req)

    @endpoint(broker, c.WITHDRAW, c.WithdrawRequest, queue=NAME)
    async def withdraw(ctx: RequestContext, req: c.WithdrawRequest) -> c.PublicationVersion:
        return await service.withdraw(ctx.actor, req)

    @endpoint(broker, c.DIFF, c.DiffRequest, queue=NAME)
    async def diff(ctx: RequestContext, req: c.DiffRequest) -> c.Diff:
        return await service.diff(ctx.actor, req)

    @endpoint(broker, c.CHECK, CheckRequest, queue=NAME)
    async def check(ctx: RequestContext, req: CheckRequest) -> CheckReply:
        return await service.check(ctx.actor, req.refs)

    return runtime
