"""The web workbench (docs/api.md, the web workbench): server-rendered pages over the same bus calls as the HTTP API."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from services.gateway.web import auth, changes, publications, runs, sources, workspaces
from services.gateway.web.security import PageHeaders

STATIC = Path(__file__).parent / "static"


def install(app: FastAPI) -> None:
    # `changes` before `runs`: its /runs/compare is not a run id.
    for module in (auth, workspaces, changes, runs, publications, sources):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # Browsers ask for /favicon.ico whatever the page says; the icon is the same small SVG.
    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> FileResponse:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    app.add_middleware(PageHeaders)
