"""The gateway's FastAPI application: auth, the error envelope, and one router per domain."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import nats
from fastapi import FastAPI

from services.gateway.errors import install_error_handlers
from services.gateway.limits import BodyLimit
from services.gateway.routes import admin, artifacts, assets, checkpoints, health, publications, runs, workspaces
from services.gateway.tokens import TokenService
from services.gateway.web import UPLOAD_PATH
from services.gateway.web import install as install_workbench
from shared.blobs import Blobs
from shared.bus import BusClient
from shared.db import Database
from shared.settings import GatewaySettings

MIGRATIONS = Path(__file__).parent / "migrations"
# Multipart routes stream files; their exact per-file limit is enforced by the route while streaming.
UPLOAD_PREFIXES = ("/v1/assets", "/v1/artifacts", UPLOAD_PATH)
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

    app = FastAPI(title="Dossier", version="1", lifespan=lifespan, docs_url="/docs", redoc_url=None)
    app.state.settings = settings
    install_error_handlers(app)
    for module in (health, admin, publications, workspaces, checkpoints, artifacts, assets, runs):
        app.include_router(module.router)
    install_workbench(app)

    def limit_for(path: str) -> int:
        if path.startswith(UPLOAD_PREFIXES):
            return settings.max_upload_bytes + MULTIPART_OVERHEAD
        return settings.max_json_bytes

    app.add_middleware(BodyLimit, limit_for=limit_for)
    return app
