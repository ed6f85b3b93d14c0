"""Publication pages: one version (body, status, sources with locators), every version, diff, revise, withdraw."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response

from services.gateway.web.bottomline import answer_changes, known_of, ledger_locators, ref_titles, titles_of
from services.gateway.web.changes import side_by_side
from services.gateway.web.render import (
    WebRoute,
    build,
    bus_of,
    checked_form,
    exc_status,
    field,
    go,
    number,
    problem,
    render,
    signed_in,
    submit,
)
from services.gateway.web.workspaces import get_workspace
from shared.bus import BusClient
from shared.contracts import publication as p
from shared.contracts import runhost as r
from shared.contracts import workspace as w
from shared.contracts.common import Actor
from shared.errors import Conflict, Invalid, NotFound, Unavailable

router = APIRouter(route_class=WebRoute, include_in_schema=False, dependencies=[Depends(signed_in)])


async def _origin(client: BusClient, actor: Actor, run_id: str | None) -> tuple[r.Run | None, w.Workspace | None]:
    """The run that made a version and its workspace, for the breadcrumbs (neither, when a person wrote it)."""
    if not run_id:
        return None, None
    try:
        run = await client.call(r.GET_RUN, r.RunIdRequest(run_id=run_id), actor=actor)
        return run, await get_workspace(client, actor, run.workspace_id)
    except NotFound:
        return None, None


@router.get("/publications/{pub_id}/versions/{version}")
async def version_page(request: Request, pub_id: str, version: int, actor: Actor = Depends(signed_in)) -> Response:
    return await version_view(request, actor, pub_id, version)


async def version_view(
    request: Request, actor: Actor, pub_id: str, version: int, *, status: int = 200, **extra: Any
) -> Response:
    client = bus_of(request)
    pub = await client.call(p.GET, build(p.GetRequest, id=pub_id), actor=actor)
    summary = next((v for v in pub.versions if v.version == version), None)
    if summary is None:
        return render(
            request,
            "error.html",
            status=404,
            heading="Not found",
            code="not_found",
            message=f"{pub_id} has no version {version}",
            details={},
        )
    body, withdrawn = None, None
    try:
        body = await client.call(p.READ, p.ReadRequest(id=pub_id, version=version), actor=actor)
    except Unavailable as exc:
        withdrawn = exc
    locators, read = await ledger_locators(client, actor, body.run_id if body else None)
    sources = [
        {"ref": s, "locators": locators.get((s.kind, s.id, s.version), [])} for s in (body.sources if body else [])
    ]
    run, ws = await _origin(client, actor, summary.run_id)
    changes = await answer_changes(client, actor, ws.id, body) if ws else []
    cited = [d.ref for d in changes] + [b for d in changes for b in d.cited_by]
    titles = await ref_titles(client, actor, cited, titles_of(run) if run else {})
    claims = None
    if body is not None and body.run_id:
        claims = await client.call(p.CLAIMS, p.ClaimsRequest(id=pub_id, version=version, limit=200), actor=actor)
    return render(
        request,
        "publication.html",
        status=status,
        pub=pub,
        summary=summary,
        body=body,
        withdrawn=withdrawn,
        sources=sources,
        claims=claims,
        run=run,
        ws=ws,
        changes=changes,
        titles=titles,
        # A run's answer read under an older goal than the workspace's now says so beside what it cites.
        goal_now=ws.goal.version if ws and run and ws.goal.version > run.goal_version else None,
        known=known_of(read),
        **extra,
    )


@router.get("/publications/{pub_id}/diff")
async def diff_page(
    request: Request,
    pub_id: str,
    from_: int = Query(alias="from", ge=1),
    to: int = Query(ge=1),
    actor: Actor = Depends(signed_in),
) -> Response:
    client = bus_of(request)
    pub = await client.call(p.GET, build(p.GetRequest, id=pub_id), actor=actor)
    diff = await client.call(p.DIFF, build(p.DiffRequest, id=pub_id, from_=from_, to=to), actor=actor)
    return render(request, "diff.html", pub=pub, diff=diff, rows=side_by_side(diff.hunks))


@router.post("/publications/{pub_id}/versions")
async def revise(request: Request, pub_id: str, actor: Actor = Depends(signed_in)) -> Response:
    form = await checked_form(request)
    body, expected = field(form, "body").replace("\r\n", "\n"), number(form, "expected_latest_version")
    try:
        req = build(p.ReviseRequest, id=pub_id, body=body, expected_latest_version=expected)
        version = await bus_of(request).call(p.REVISE, req, actor=actor)
    except (Invalid, Conflict) as exc:
        # Someone saved a version meanwhile (or the body was refused): the page shows the newest version, and
        # the typed body stays in the form beside the message, to be saved over it knowingly.
        shown = int(exc.details.get("current_latest_version") or expected)
        return await version_view(
            request,
            actor,
            pub_id,
            shown,
            status=exc_status(exc),
            errors=problem(exc, {"body": "new-body"}, "new-body"),
            body_draft=body,
        )
    return go(f"/publications/{pub_id}/versions/{version.version}", "New version saved.")


@router.get("/publications/{pub_id}/versions/{version}/withdraw")
async def confirm_withdraw(request: Request, pub_id: str, version: int, actor: Actor = Depends(signed_in)) -> Response:
    pub = await bus_of(request).call(p.GET, build(p.GetRequest, id=pub_id), actor=actor)
    return render(request, "confirm_withdraw.html", pub=pub, version=version)


@router.post("/publications/{pub_id}/versions/{version}/withdraw")
async def withdraw(request: Request, pub_id: str, version: int, actor: Actor = Depends(signed_in)) -> Response:
    return await submit(
        request,
        actor,
        p.WITHDRAW,
        lambda form: build(p.WithdrawRequest, id=pub_id, version=version, reason=field(form, "reason")),
        f"/publications/{pub_id}/versions/{version}",
        "Version withdrawn.",
    )
