"""Artifacts over HTTP: upload (bytes to object storage, the reference to the artifact service) and download.

A retained file is untrusted HTML, so it is always served inside a CSP sandbox and never type-sniffed.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import StreamingResponse

from services.gateway.deps import Bus, PathId, build, bus, current_actor
from services.gateway.openapi import errors, multipart_body
from services.gateway.transport.uploads import only_fields, read_multipart
from shared.blobs import Blobs, content_key
from shared.bus import BusClient
from shared.contracts import artifact as a
from shared.contracts.common import Actor
from shared.errors import DomainError, Invalid, Unavailable, Unsupported
from shared.settings import GatewaySettings
from shared.sniff import is_html_upload

router = APIRouter(prefix="/v1/artifacts", tags=["artifacts"])

CHUNK_BYTES = 1024 * 1024
SANDBOX_HEADERS = {
    "content-type": a.MEDIA_TYPE_HTML,
    "content-security-policy": "sandbox",
    "x-content-type-options": "nosniff",
    "cache-control": "private",
}


def _blobs(request: Request) -> Blobs:
    blobs: Blobs = request.app.state.blobs
    return blobs


FORM_FIELDS = ("title", "expires_at")
UPLOAD_BODY = multipart_body(a.RegisterRequest, FORM_FIELDS, required=("title",))


@router.post(
    "",
    status_code=201,
    response_model=a.Artifact,
    responses=errors(413, 415),
    openapi_extra=UPLOAD_BODY,
)
async def upload_artifact(request: Request, bus: Bus) -> Response:
    """Retain an HTML file (multipart: `file`, `title`, optional `expires_at`)."""
    settings: GatewaySettings = request.app.state.settings
    blobs = _blobs(request)
    fields, upload = await read_multipart(request, max_file_bytes=settings.max_upload_bytes)
    try:
        only_fields(fields, FORM_FIELDS)
        title = fields.get("title", "")
        if not title.strip():
            raise Invalid("the 'title' field is missing", {"field": "title"})
        if upload.size == 0:
            raise Invalid("the file is empty", {"field": "file"})
        if not is_html_upload(upload.path, upload.content_type):
            raise Unsupported("only HTML files can be retained as artifacts", {"field": "file"})
        key = content_key(upload.sha256)
        # The form's fields as the contract parses them (`expires_at`: an ISO 8601 time with its offset).
        register = build(
            a.RegisterRequest.model_validate,
            {
                **fields,
                "bucket": blobs.bucket,
                "key": key,
                "sha256": upload.sha256,
                "size": upload.size,
                "media_type": a.MEDIA_TYPE_HTML,
            },
        )
        # Content-addressed: identical bytes share one object. It is written every time, never taken as
        # already there: an object found under the key holds bytes this upload did not write.
        await blobs.put_file(key, str(upload.path), content_type=a.MEDIA_TYPE_HTML)
        return await bus.relay(a.REGISTER, register, status_code=201)
    finally:
        upload.discard()


@router.get("/{artifact_id}", response_model=a.Artifact, responses=errors(404))
async def get_artifact(artifact_id: PathId, bus: Bus) -> Response:
    """The artifact's metadata."""
    return await bus.relay(a.GET, a.ArtifactIdRequest(artifact_id=artifact_id))


@router.get(
    "/{artifact_id}/content",
    response_model=None,
    responses={
        **errors(404, 409),
        200: {"content": {a.MEDIA_TYPE_HTML: {"schema": {"type": "string"}}}, "description": "The retained bytes"},
    },
)
async def download_artifact(
    artifact_id: PathId, request: Request, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> Response:
    """The bytes, served inside a CSP sandbox and never type-sniffed."""
    # The artifact service answers with the location only after checking scope, expiry and the hash reference.
    location = await client.call(a.OPEN, a.ArtifactIdRequest(artifact_id=artifact_id), actor=actor)
    blobs = _blobs(request)
    if location.bucket != blobs.bucket:
        raise DomainError("the artifact is stored where the gateway cannot read it", code="internal")
    size, expected = location.artifact.size, location.artifact.content_hash
    first = await blobs.get_bytes(location.key, offset=0, length=min(CHUNK_BYTES, size))
    headers = {**SANDBOX_HEADERS, "content-length": str(size)}
    if size <= CHUNK_BYTES:
        # Small enough to check whole before a byte is sent: bytes that do not match are never served.
        if len(first) != size or hashlib.sha256(first).hexdigest() != expected:
            raise Unavailable(f"the bytes of artifact {artifact_id} do not match", reason="failed")
        return Response(content=first, headers=headers)
    return StreamingResponse(stream_checked(blobs, location.key, first, size, expected), headers=headers)


async def stream_checked(blobs: Blobs, key: str, first: bytes, size: int, expected: str) -> AsyncIterator[bytes]:
    """Yield the bytes, holding the last chunk back until the whole file's hash is known."""
    digest = hashlib.sha256(first)
    held, read = first, len(first)
    while read < size:
        chunk = await blobs.get_bytes(key, offset=read, length=min(CHUNK_BYTES, size - read))
        if not chunk:
            break
        digest.update(chunk)
        read += len(chunk)
        yield held
        held = chunk
    if read != size or digest.hexdigest() != expected:
        # The response stops short of its Content-Length: the client sees a broken download, not a whole one.
        raise RuntimeError(f"artifact bytes under {key} do not match their hash")
    yield held
