"""The gateway's FastAPI application: auth, the error envelope, and one router per domain."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import nats
from fastapi import Depends, FastAPI

from services.gateway import observe
from services.gateway.deps import check_token, reject_unstorable
from services.gateway.errors import install_error_handlers
from services.gateway.limits import STREAMED_ROUTES, Authenticate, BodyLimit
from services.gateway.openapi import COMMON, errors, install_openapi, operation_id
from services.gateway.routes import admin, artifacts, assets, checkpoints, health, publications, runs, workspaces
from services.gateway.tokens import TokenService
from shared import tracing
from shared.blobs import Blobs
from shared.bus import BusClient
from shared.contracts.common import Actor
from shared.db import Database
from shared.settings import GatewaySettings

MIGRATIONS = Path(__file__).parent / "migrations"
DESCRIPTION = (
    "The HTTP API of Dossier. Every error answers the envelope `{error: {code, message, details}}`; "
    "every response carries `X-Request-ID`. The bus underneath is described in docs/asyncapi.json."
)
# Multipart routes stream files; their exact per-file limit is enforced by the route while streaming.
MULTIPART_OVERHEAD = 1024 * 1024


def create_app(settings: GatewaySettings) -> FastAPI:
    db = Database(settings.database_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await db.connect(MIGRATIONS)
        nc = await nats.connect(settings.nats_url, name="gateway", max_reconnect_attempts=-1)
        app.state.bus = BusClient(nc, timeout=settings.request_timeout)
        app.state.tokens = TokenService(db, admin_token=settings.admin_token)
        app.state.blobs = Blobs(settings)
        await app.state.blobs.ensure_bucket()
        try:
            yield
        finally:
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
    )
    app.state.settings = settings
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(observe.router)
    for module in (admin, workspaces, checkpoints, runs, publications, assets, artifacts):
        app.include_router(module.router, responses=errors(*COMMON))

    def limit_for(method: str, path: str) -> tuple[int, bool]:
        if (method, path) in STREAMED_ROUTES:
            return settings.max_upload_bytes + MULTIPART_OVERHEAD, True
        return settings.max_json_bytes, False

    async def check(path: str, authorization: str | None) -> Actor | None:
        return await check_token(app.state.tokens, path, authorization)

    # The last added runs first: the size limit before the token, the token before any parsing.
    app.add_middleware(Authenticate, check=check)
    app.add_middleware(BodyLimit, limit_for=limit_for)
    # Outermost: the request id is bound before anything else runs, and every answer carries it.
    app.add_middleware(observe.RequestIdAndMetrics)
    tracing.instrument_fastapi(app)
    install_openapi(app)
    return app
