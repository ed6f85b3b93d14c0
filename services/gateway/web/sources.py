"""Sources, uploads with progress, imports from approved roots, evidence search and passages, artifacts."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse

from services.gateway.deps import ActorBus
from services.gateway.routes.artifacts import CHUNK_BYTES, SANDBOX_HEADERS, download_artifact, stream_checked
from services.gateway.routes.assets import register_stored
from services.gateway.transport.limits import tell_connection
from services.gateway.transport.uploads import stream_multipart
from services.gateway.web.render import (
    WebRoute,
    build,
    bus_of,
    checked_form,
    field,
    go,
    problem,
    render,
    signed_in,
    submit,
)
from services.gateway.web.security import check_csrf
from shared.blobs import Blobs
from shared.contracts import assets as c
from shared.contracts.common import INT32_MAX, Actor
from shared.errors import HTTP_STATUS, DomainError, Invalid, NotFound, TooLarge, Unavailable, Unsupported
from shared.settings import GatewaySettings

router = APIRouter(route_class=WebRoute, include_in_schema=False, dependencies=[Depends(signed_in)])

UPLOAD_PATH = "/upload"
# The source page shows a version's extracted text this many passages at a time.
PASSAGES_PAGE = 50


def _source_url(source_id: str) -> str:
    return f"/sources/{quote(source_id, safe='')}"


async def _source(request: Request, actor: Actor, source_id: str) -> c.Source:
    return await bus_of(request).call(c.GET_SOURCE, build(c.GetSourceRequest, source_id=source_id), actor=actor)


@router.get("/sources/{source_id}")
async def source_page(
    request: Request,
    source_id: str,
    version: int | None = Query(default=None, ge=1, le=INT32_MAX),
    cursor: str | None = Query(default=None, max_length=1000),
    actor: Actor = Depends(signed_in),
) -> Response:
    client = bus_of(request)
    source = await _source(request, actor, source_id)
    versions = sorted(source.versions, key=lambda v: v.version, reverse=True)
    shown = version or source.active_version
    passages, unreadable = None, None
    if shown:
        req = build(c.PassagesRequest, source_id=source_id, version=shown, limit=PASSAGES_PAGE, cursor=cursor)
        try:
            passages = await client.call(c.PASSAGES, req, actor=actor)
        except (Unavailable, NotFound) as exc:
            unreadable = exc.message
    return render(
        request,
        "source.html",
        source=source,
        versions=versions,
        shown=shown,
        passages=passages,
        unreadable=unreadable,
        first_page=cursor is None,
    )


@router.get("/sources/{source_id}/versions/{version}/original")
async def original(request: Request, source_id: str, version: int, actor: Actor = Depends(signed_in)) -> Response:
    """The file as uploaded: always a download (never shown inline: an HTML original is a document's own
    markup), its bytes checked against the version's hash as they are sent."""
    req = build(c.VersionRequest, source_id=source_id, version=version)
    where = await bus_of(request).call(c.ORIGINAL, req, actor=actor)
    blobs: Blobs = request.app.state.blobs
    if where.bucket != blobs.bucket:
        raise DomainError("the original is stored where the gateway cannot read it", code="internal")
    name = where.filename or f"{source_id}-v{version}.{where.kind}"
    headers = {
        **SANDBOX_HEADERS,
        "content-type": "application/octet-stream",
        "content-disposition": f"attachment; filename*=UTF-8''{quote(name, safe='')}",
        "content-length": str(where.size),
    }
    first = await blobs.get_bytes(where.key, offset=0, length=min(CHUNK_BYTES, where.size))
    return StreamingResponse(stream_checked(blobs, where.key, first, where.size, where.sha256), headers=headers)


@router.post(UPLOAD_PATH)
async def upload(request: Request, actor: Actor = Depends(signed_in)) -> Response:
    # Checked from the address before the body is read: a forged upload is refused without a byte of its
    # file streamed into storage (the form puts the token in its action, see _macros.html).
    check_csrf(request, getattr(request.state, "binding", None), request.query_params.get("csrf"))
    # Its sender is now known: the file is held to a signed-in caller's body rules, not the pre-auth ones.
    tell_connection(request.scope, authenticated=True)
    settings: GatewaySettings = request.app.state.settings
    blobs: Blobs = request.app.state.blobs
    fields, upload = await stream_multipart(request, blobs, max_file_bytes=settings.max_upload_bytes)
    data = {"source_id": fields.get("source_id", "").strip()}
    # The workbench's form always sends the field, empty outside a workspace (the API refuses an empty one).
    if fields.get("workspace_id"):
        data["workspace_id"] = fields["workspace_id"]
    version = await register_stored(request, ActorBus(bus_of(request), actor), data, upload)
    if version.reused:
        notice = f"Those bytes are already version {version.version}; nothing new was stored."
    elif version.status == "failed":
        notice = f"Version {version.version} failed extraction; the active version stays active."
    else:
        notice = f"Version {version.version} is {version.status}."
    return go(_source_url(version.source_id), notice)


@router.get("/sources/{source_id}/retire")
async def confirm_retire(request: Request, source_id: str, actor: Actor = Depends(signed_in)) -> Response:
    return render(request, "confirm_retire.html", source=await _source(request, actor, source_id))


@router.post("/sources/{source_id}/retire")
async def retire(request: Request, source_id: str, actor: Actor = Depends(signed_in)) -> Response:
    return await submit(
        request,
        actor,
        c.RETIRE,
        lambda _: build(c.RetireRequest, source_id=source_id),
        _source_url(source_id),
        "Source retired: no version of it can be read any more.",
    )


@router.get("/sources/{source_id}/versions/{version}/passage")
async def passage(
    request: Request,
    source_id: str,
    version: int,
    locator: str = Query(min_length=1, max_length=1000),
    actor: Actor = Depends(signed_in),
) -> Response:
    req = build(c.LocateRequest, source_id=source_id, version=version, locator=locator)
    evidence = await bus_of(request).call(c.LOCATE, req, actor=actor)
    return go(f"/evidence/{quote(evidence.evidence_id, safe='')}")


@router.get("/evidence")
async def search(
    request: Request,
    q: str = Query(default="", max_length=1000),
    source_id: str = Query(default="", max_length=200),
    actor: Actor = Depends(signed_in),
) -> Response:
    hits = None
    if q.strip():
        req = build(c.SearchRequest, q=q, source_id=source_id.strip() or None, limit=50)
        hits = (await bus_of(request).call(c.SEARCH, req, actor=actor)).items
    return render(request, "search.html", q=q, source_id=source_id, hits=hits)


@router.get("/evidence/{evidence_id}")
async def evidence(request: Request, evidence_id: str, actor: Actor = Depends(signed_in)) -> Response:
    passage = await bus_of(request).call(c.READ, build(c.EvidenceReadRequest, evidence_id=evidence_id), actor=actor)
    return render(request, "evidence.html", passage=passage)


@router.get("/import")
async def import_page(request: Request, workspace_id: str = "", actor: Actor = Depends(signed_in)) -> Response:
    return render(request, "import.html", values={"workspace_id": workspace_id})


@router.post("/import")
async def import_file(request: Request, actor: Actor = Depends(signed_in)) -> Response:
    form = await checked_form(request)
    settings: GatewaySettings = request.app.state.settings
    values = {name: field(form, name).strip() for name in ("root", "path", "source_id", "workspace_id")}
    try:
        req = build(c.ImportRequest, **{**values, "workspace_id": values["workspace_id"] or None})
        version = await bus_of(request).call(c.IMPORT, req, actor=actor, timeout=settings.ingest_timeout)
    except (Invalid, NotFound, Unsupported, TooLarge) as exc:
        # Beside the field it is about, with what was typed; an unknown root comes with the approved ones.
        errors = problem(exc, {name: name for name in values}, "path")
        roots = exc.details.get("roots")
        return render(request, "import.html", status=HTTP_STATUS[exc.code], values=values, errors=errors, roots=roots)
    return go(_source_url(version.source_id), f"Imported as version {version.version} ({version.status}).")


@router.get("/artifacts/{artifact_id}")
async def artifact(request: Request, artifact_id: str, actor: Actor = Depends(signed_in)) -> Response:
    # The same download as the API: served inside a CSP sandbox, never type-sniffed.
    return await download_artifact(artifact_id, request, actor=actor, client=bus_of(request))
