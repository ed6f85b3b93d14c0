"""The gateway's FastAPI application: auth, the error envelope, and one router per domain."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import nats
from fastapi import Depends, FastAPI
from starlette.routing import Route

from services.gateway import observe
from services.gateway.deps import check_token, reject_unstorable
from services.gateway.errors import install_error_handlers
from services.gateway.holds import HeldWrites, WriteHold, follow_holds
from services.gateway.mcp.endpoint import McpEndpoint
from services.gateway.mcp.run_bindings import RunBindings
from services.gateway.openapi import COMMON, errors, install_openapi, operation_id
from services.gateway.routes import (
    admin,
    artifacts,
    assets,
    checkpoints,
    external,
    health,
    publications,
    runs,
    workspaces,
)
from services.gateway.sessions import SessionService
from services.gateway.tokens import TokenService
from services.gateway.transport.admission import PreauthBudget, SharedTokenBuckets, TokenBuckets
from services.gateway.transport.hot import HotReads
from services.gateway.transport.limits import STREAMED_ROUTES, Admission
from services.gateway.web import install as install_workbench
from services.gateway.web.render import error_page
from services.gateway.web.security import API_PREFIXES
from services.gateway.web.sources import UPLOAD_PATH
from shared import tracing
from shared.blobs import Blobs
from shared.bus import BusClient
from shared.contracts.common import Actor
from shared.db import Database
from shared.health import HealthReporter, connection_answers
from shared.natsauth import connect_options
from shared.proof import signer_for
from shared.settings import GatewaySettings

MIGRATIONS = Path(__file__).parent / "migrations"
DESCRIPTION = (
    "The HTTP API of Dossier. Every error answers the envelope `{error: {code, message, details}}`; "
    "every response carries `X-Request-ID`. The bus underneath is described in docs/asyncapi.json. "
    "Each token gets at most `DOSSIER_RATE_PER_TOKEN` requests a second (429 `rate_limited` with "
    "`Retry-After` over it). A request without a token that carries a body is answered 503 `overloaded` "
    "when the gateway holds as many such bodies as it may; retry it."
)
# Multipart routes stream files; their exact per-file limit is enforced by the route while streaming.
MULTIPART_OVERHEAD = 1024 * 1024


def create_app(settings: GatewaySettings, *, on_started: Callable[[], None] | None = None) -> FastAPI:
    """`on_started` runs once the lifespan has connected everything (the process entry point freezes the
    start-up objects out of the garbage collector's view there)."""
    db = Database(settings.database_url)
    mcp = McpEndpoint(version="1")
    write_hold = WriteHold()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await db.connect(MIGRATIONS)
        nc = await nats.connect(
            settings.nats_servers,
            name="gateway",
            max_reconnect_attempts=-1,
            reconnect_time_wait=settings.nats_reconnect_wait,
            ping_interval=settings.nats_ping_interval,
            **connect_options(settings),
        )
        app.state.bus = BusClient(nc, timeout=settings.request_timeout, signer=signer_for("gateway", settings))
        health = None
        if settings.health_file is not None:
            reporter = HealthReporter(
                settings.health_file, partial(connection_answers, nc), interval=settings.health_interval
            )
            health = asyncio.create_task(reporter.run())
        app.state.tokens = TokenService(
            db, admin_token=settings.admin_token, cache_seconds=settings.token_cache_seconds
        )
        app.state.sessions = SessionService(db, app.state.tokens, cache_seconds=settings.token_cache_seconds)
        app.state.run_bindings = RunBindings(db)
        app.state.blobs = Blobs(settings)
        await app.state.blobs.ensure_bucket()
        holds = asyncio.create_task(follow_holds(db, write_hold))
        if on_started is not None:
            on_started()
        try:
            async with mcp.running():
                yield
        finally:
            holds.cancel()
            if health is not None:
                health.cancel()
            await nc.drain()
            await db.close()

    app = FastAPI(
        title="Dossier",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        generate_unique_id_function=operation_id,
        dependencies=[Depends(reject_unstorable)],
        # FastAPI's own OpenTelemetry layer looked up the global providers on every request (about 5% of
        # the hottest read); shared/tracing.py instruments the app when tracing is configured.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    app.state.db = db
    app.state.write_hold = write_hold
    app.state.metrics_registry = observe.metrics_registry(settings)
    install_error_handlers(app, api_prefixes=API_PREFIXES, stray_page=error_page)
    app.include_router(health.router)
    app.include_router(observe.router)
    for module in (admin, workspaces, checkpoints, runs, external, publications, assets, artifacts):
        app.include_router(module.router, responses=errors(*COMMON))
    # The MCP face: a raw ASGI route (not a Mount, which would redirect `/mcp` to `/mcp/`). POST, and DELETE
    # to end a session; GET answers 405: a stateless server pushes nothing, so no idle stream stays open.
    app.router.routes.append(Route("/mcp", mcp, methods=["POST", "DELETE"], include_in_schema=False))
    install_workbench(app)

    def limit_for(method: str, path: str) -> tuple[int, bool]:
        # The workbench's upload form streams its file like the API's multipart routes.
        if (method, path) in STREAMED_ROUTES or (method, path) == ("POST", UPLOAD_PATH):
            return settings.max_upload_bytes + MULTIPART_OVERHEAD, True
        return settings.max_json_bytes, False

    async def check(path: str, authorization: str | None) -> Actor | None:
        return await check_token(app.state.tokens, path, authorization)

    # The last added runs first: size, token and rate before any body is read or parsed, and the hottest
    # read (answered beside the router) only once the token is known; a held write waits last, once it is
    # known to be allowed.
    app.add_middleware(HeldWrites, hold=write_hold)
    app.add_middleware(HotReads, routes=publications.HOT_READS, bus=lambda: app.state.bus)
    app.state.rates = (
        SharedTokenBuckets(settings.rate_per_token, settings.rate_burst, settings.gateway_rates_file)
        if settings.gateway_rates_file is not None
        else TokenBuckets(settings.rate_per_token, settings.rate_burst)
    )
    app.add_middleware(
        Admission,
        limit_for=limit_for,
        check=check,
        rates=app.state.rates,
        budget=PreauthBudget(settings.preauth_buffer_bytes, settings.preauth_wait_seconds),
    )
    # Outermost: the request id is bound before anything else runs, and every answer carries it.
    app.add_middleware(observe.RequestIdAndMetrics)
    tracing.instrument_fastapi(app)
    install_openapi(app)
    return app
