"""Sources, assets and evidence (docs/api.md). Uploads stream to object storage; the bus carries only refs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.convertors import StringConvertor, register_url_convertor

from services.gateway.deps import ActorBus, Bus, Paging, PathId, actor_bus, json_response
from services.gateway.openapi import errors, multipart_body
from services.gateway.transport.uploads import StoredUpload, only_fields, stream_multipart
from shared.blobs import Blobs, content_key
from shared.bus import validation_details
from shared.contracts import assets as c
from shared.contracts.common import NOT_BLANK
from shared.errors import Invalid
from shared.settings import GatewaySettings

router = APIRouter(prefix="/v1", tags=["sources and evidence"])


class AssetIdConvertor(StringConvertor):
    """Any path segment but `import` routes to `GET /v1/assets/{asset_id}`, so `/v1/assets/import` is POST's
    alone (its 405 says `Allow: POST`, as the document does); the parameter's pattern checks the id's shape."""

    regex = "(?!import$)[^/]+"


register_url_convertor("asset_id", AssetIdConvertor())
AssetId = Annotated[str, Path(pattern=f"^{c.ASSET_ID_REGEX}$")]
SourceIdPath = Annotated[str, Path(pattern=c.SOURCE_ID_PATTERN)]

FORM_FIELDS = ("source_id", "workspace_id")
UPLOAD_BODY = multipart_body(c.UploadRequest, FORM_FIELDS, required=("source_id",))
REUSED: dict[int | str, dict[str, Any]] = {
    200: {"model": c.AssetVersion, "description": "Bytes this source already had: the existing version"}
}


def _settings(request: Request) -> GatewaySettings:
    settings: GatewaySettings = request.app.state.settings
    return settings


def _blobs(request: Request) -> Blobs:
    blobs: Blobs = request.app.state.blobs
    return blobs


def _created_or_reused(version: c.AssetVersion) -> Response:
    """201 for a new version (failed extraction included), 200 for bytes this source already had."""
    return json_response(version.model_dump_json(), 200 if version.reused else 201)


@router.post(
    "/assets",
    status_code=201,
    response_model=c.AssetVersion,
    responses={**errors(404, 409, 413, 415), **REUSED},
    openapi_extra=UPLOAD_BODY,
)
async def upload_asset(request: Request, bus: Bus) -> Response:
    """Upload a file as a new version of a source (multipart: `file`, `source_id`, optional `workspace_id`)."""
    fields, upload = await stream_multipart(
        request, _blobs(request), max_file_bytes=_settings(request).max_upload_bytes
    )
    try:
        only_fields(fields, FORM_FIELDS)
    except Invalid:
        await _blobs(request).delete(upload.key)
        raise
    return _created_or_reused(await register_stored(request, bus, fields, upload))


async def register_stored(
    request: Request, bus: ActorBus, fields: dict[str, str], upload: StoredUpload
) -> c.AssetVersion:
    """Move a streamed upload to its content key and register it as a version of its source."""
    settings = _settings(request)
    blobs = _blobs(request)
    key = content_key(upload.sha256)
    try:
        if upload.size == 0:
            raise Invalid("the file is empty", {"field": "file"})
        try:
            req = c.UploadRequest(
                source_id=fields.get("source_id", ""),
                workspace_id=fields.get("workspace_id"),
                filename=upload.filename[:500],
                blob=c.BlobRef(bucket=blobs.bucket, key=key, sha256=upload.sha256, size=upload.size),
            )
        except ValidationError as exc:
            raise Invalid("the upload's fields are malformed", validation_details(exc)) from exc
        # Content-addressed: identical bytes share one object. The copy is made every time (an object
        # found under the key holds bytes this upload did not write), by the store itself: the bytes
        # never pass through this process again.
        await blobs.copy(upload.key, key)
    finally:
        await blobs.delete(upload.key)
    return await bus.call(c.UPLOAD, req, timeout=settings.ingest_timeout)


@router.post(
    "/assets/import",
    status_code=201,
    response_model=c.AssetVersion,
    responses={**errors(404, 409, 413, 415), **REUSED},
)
async def import_asset(body: c.ImportRequest, request: Request, bus: Bus) -> Response:
    """A file from an approved root; a path that resolves outside the root answers 422."""
    return _created_or_reused(await bus.call(c.IMPORT, body, timeout=_settings(request).ingest_timeout))


@router.get("/assets/{asset_id:asset_id}", response_model=c.AssetVersion, responses=errors(404))
async def get_asset(asset_id: AssetId, bus: Bus) -> Response:
    """One asset version with its extraction coverage."""
    return await bus.relay(c.GET_ASSET, c.GetAssetRequest(asset_id=asset_id))


@router.get("/sources/{source_id}", response_model=c.Source, responses=errors(404))
async def get_source(source_id: SourceIdPath, paging: Paging, bus: Bus) -> Response:
    """A source with its active version and one page of its versions, oldest first; `next_cursor` pages on."""
    return await bus.relay(
        c.GET_SOURCE, c.GetSourceRequest(source_id=source_id, limit=paging.limit, cursor=paging.cursor)
    )


@router.post("/sources/{source_id}/retire", response_model=c.Source, responses=errors(404, 413))
async def retire_source(source_id: SourceIdPath, bus: Bus) -> Response:
    """Retire a source: its versions stop being read."""
    return await bus.relay(c.RETIRE, c.RetireRequest(source_id=source_id))


@router.get("/evidence/search", response_model=c.SearchReply)
async def search_evidence(
    q: str = Query(min_length=1, max_length=1000, pattern=NOT_BLANK),
    source_id: str | None = Query(default=None, pattern=c.SOURCE_ID_PATTERN),
    limit: int = Query(default=10, ge=1, le=100),
    bus: ActorBus = Depends(actor_bus),
) -> Response:
    """Full-text search over active versions; a snippet is not a delivered passage."""
    return await bus.relay(c.SEARCH, c.SearchRequest(q=q, source_id=source_id, limit=limit))


@router.get("/evidence/{evidence_id}", response_model=c.Evidence, responses=errors(404, 409))
async def read_evidence(evidence_id: PathId, bus: Bus) -> Response:
    """One passage at its exact version."""
    return await bus.relay(c.READ, c.EvidenceReadRequest(evidence_id=evidence_id))
