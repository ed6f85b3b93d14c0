"""Sources, assets and evidence (CONTRACT.md). Uploads stream to object storage; the bus carries only refs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field, ValidationError

from services.gateway.deps import bus, current_actor, page
from services.gateway.uploads import read_multipart
from shared.blobs import Blobs, content_key
from shared.bus import BusClient, validation_details
from shared.contracts import assets as c
from shared.contracts.common import Actor, Model
from shared.errors import Invalid
from shared.settings import GatewaySettings

router = APIRouter(prefix="/v1")


class ImportBody(Model):
    root: str = Field(min_length=1, max_length=100)
    path: str = Field(min_length=1, max_length=4096)
    source_id: str = Field(pattern=c.SOURCE_ID_PATTERN)
    workspace_id: str | None = Field(default=None, min_length=1, max_length=200)


def _settings(request: Request) -> GatewaySettings:
    settings: GatewaySettings = request.app.state.settings
    return settings


def _blobs(request: Request) -> Blobs:
    blobs: Blobs = request.app.state.blobs
    return blobs


def _created_or_reused(data: Any) -> JSONResponse:
    """201 for a new version (failed extraction included), 200 for bytes this source already had."""
    return JSONResponse(data, status_code=200 if data.get("reused") else 201)


@router.post("/assets", status_code=201)
async def upload(
    request: Request, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    settings = _settings(request)
    fields, upload = await read_multipart(request, max_file_bytes=settings.max_upload_bytes)
    try:
        if upload.size == 0:
            raise Invalid("the file is empty", {"field": "file"})
        blobs = _blobs(request)
        key = content_key(upload.sha256)
        try:
            req = c.UploadRequest(
                source_id=fields.get("source_id", ""),
                workspace_id=fields.get("workspace_id") or None,
                filename=upload.filename[:500],
                blob=c.BlobRef(bucket=blobs.bucket, key=key, sha256=upload.sha256, size=upload.size),
            )
        except ValidationError as exc:
            raise Invalid("the upload's fields are malformed", validation_details(exc)) from exc
        # Content-addressed: identical bytes are stored once, whoever uploads them.
        if not await blobs.exists(key):
            await blobs.put_file(key, str(upload.path))
    finally:
        upload.discard()
    return _created_or_reused(await client.call(c.UPLOAD, req, actor=actor, timeout=settings.ingest_timeout))


@router.post("/assets/import", status_code=201)
async def import_file(
    body: ImportBody, request: Request, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    req = c.ImportRequest(**body.model_dump())
    data = await client.call(c.IMPORT, req, actor=actor, timeout=_settings(request).ingest_timeout)
    return _created_or_reused(data)


@router.get("/assets/{asset_id}")
async def get_asset(asset_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)) -> Any:
    return await client.call(c.GET_ASSET, {"asset_id": asset_id}, actor=actor)


@router.get("/sources/{source_id}")
async def get_source(
    source_id: str,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> Any:
    return await client.call(c.GET_SOURCE, {"source_id": source_id, **paging}, actor=actor)


@router.post("/sources/{source_id}/retire")
async def retire(source_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)) -> Any:
    return await client.call(c.RETIRE, {"source_id": source_id}, actor=actor)


@router.get("/evidence/search")
async def search(
    q: str = Query(min_length=1, max_length=1000, pattern=r"\S"),
    source_id: str | None = Query(default=None, min_length=1, max_length=200),
    limit: int = Query(default=10, ge=1, le=100),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> Any:
    return await client.call(c.SEARCH, {"q": q, "source_id": source_id, "limit": limit}, actor=actor)


@router.get("/evidence/{evidence_id}")
async def read_evidence(
    evidence_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> Any:
    return await client.call(c.READ, {"evidence_id": evidence_id}, actor=actor)
