"""Run pages: live status, plan.md (editable mid-run), the ledger, the working files, cancel, the answer."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request, Response

from services.gateway.web.changes import answer_changes, claims_of
from services.gateway.web.render import (
    WebRoute,
    build,
    bus_of,
    checked_form,
    field,
    optional,
    render,
    signed_in,
    submit,
)
from services.gateway.web.workspaces import get_workspace
from shared.bus import BusClient
from shared.contracts import artifact as a
from shared.contracts import publication as p
from shared.contracts import runhost as r
from shared.contracts import workspace as w
from shared.contracts.common import Actor
from shared.errors import DomainError, NotFound

router = APIRouter(route_class=WebRoute, include_in_schema=False, dependencies=[Depends(signed_in)])

FINAL = ("completed", "failed", "cancelled")
# The report is found among the workspace's newest pinned artifacts: only this many are looked at.
REPORT_SEARCH_LIMIT = 200


async def _answer(
    client: BusClient, actor: Actor, run: r.Run
) -> tuple[p.PublicationVersion | None, a.Artifact | w.CatalogItem | None, str | None]:
    """The run's publication version, and its report artifact (the one the run names, else the one retained
    under its title), if any."""
    ref = run.publication
    if not ref:
        return None, None, None
    try:
        answer = await client.call(p.READ, p.ReadRequest(id=ref.id, version=ref.version), actor=actor)
    except DomainError as exc:
        return None, None, exc.message
    if run.report_artifact_id is not None:
        try:
            report = await client.call(a.GET, a.ArtifactIdRequest(artifact_id=run.report_artifact_id), actor=actor)
        except DomainError:
            return answer, None, None
        return answer, report, None
    try:
        # A run that named no report (before runs did): among the workspace's pinned artifacts.
        pinned = w.CatalogBrowseRequest(workspace_id=run.workspace_id, kind="artifact", limit=REPORT_SEARCH_LIMIT)
        catalog = await client.call(w.CATALOG_BROWSE, pinned, actor=actor)
    except DomainError:
        return answer, None, None
    own = f"{r.REPORT_TITLE_PREFIX}{run.id}:"
    artifacts = catalog.items
    # Earlier runs titled their report as their answer ("Run <id>: ..."), which names the run too.
    reports = [i for i in artifacts if i.title.startswith(own)] or [
        i for i in artifacts if i.title == answer.title and answer.title.startswith(f"Run {run.id}:")
    ]
    return answer, (reports[0] if reports else None), None


def titles_of(run: r.Run) -> dict[str, str]:
    """What the run was offered, by `kind:id`: the ledger names materials by title, not by id."""
    return {f"{i.kind}:{i.id}": i.title for i in run.catalog.items}


@router.get("/runs/{run_id}")
async def run_page(
    request: Request, run_id: str, cursor: str | None = None, actor: Actor = Depends(signed_in)
) -> Response:
    return await _run_page(request, run_id, actor, cursor)


@router.post("/runs/{run_id}/take")
async def take_over(request: Request, run_id: str, actor: Actor = Depends(signed_in)) -> Response:
    """A person takes an external run over: its new lease token is shown on this page, once."""
    await checked_form(request)
    req = build(r.TakeRequest, run_id=run_id, force=True)
    taken = await bus_of(request).call(r.EXTERNAL_TAKE, req, actor=actor)
    return await _run_page(request, run_id, actor, None, taken=taken.lease)


async def _run_page(
    request: Request, run_id: str, actor: Actor, cursor: str | None, *, taken: r.Lease | None = None
) -> Response:
    client = bus_of(request)
    run = await client.call(r.GET_RUN, build(r.RunIdRequest, run_id=run_id), actor=actor)
    # An empty cursor is the first page, as no cursor is.
    ledger_page = build(r.RunPageRequest, run_id=run_id, cursor=cursor or None)
    plan_read = client.call(r.READ_FILE, r.ReadFileRequest(run_id=run_id, path="plan.md"), actor=actor)
    ledger, files, plan, ws = await asyncio.gather(
        client.call(r.LEDGER, ledger_page, actor=actor),
        client.call(r.LIST_FILES, r.RunPageRequest(run_id=run_id), actor=actor),
        optional(plan_read),
        optional(get_workspace(client, actor, run.workspace_id)),
    )
    answer, report, answer_error = await _answer(client, actor, run)
    changes, claims = await asyncio.gather(
        answer_changes(client, actor, run.workspace_id, answer), claims_of(client, actor, answer)
    )
    return render(
        request,
        "run.html",
        changes=changes,
        claims=claims,
        run=run,
        ws=ws,
        titles=titles_of(run),
        # The page that shows a new lease token once never reloads itself (the token would be gone).
        live=run.status not in FINAL and taken is None,
        ledger=ledger,
        files=files.items,
        files_released_at=files.released_at.strftime("%Y-%m-%d %H:%M UTC") if files.released_at else None,
        plan=plan.text if plan else None,
        answer=answer,
        answer_error=answer_error,
        report=report,
        stats=run.stats.model_dump(),
        taken=taken,
    )


@router.post("/runs/{run_id}/plan")
async def write_plan(request: Request, run_id: str, actor: Actor = Depends(signed_in)) -> Response:
    # Browsers send textarea lines with CRLF; the plan is a markdown file with plain newlines.
    return await submit(
        request,
        actor,
        r.WRITE_PLAN,
        lambda form: build(r.WritePlanRequest, run_id=run_id, text=field(form, "plan").replace("\r\n", "\n")),
        f"/runs/{run_id}",
        "plan.md saved: the run's next step reads it.",
    )


@router.post("/runs/{run_id}/cancel")
async def cancel(request: Request, run_id: str, actor: Actor = Depends(signed_in)) -> Response:
    return await submit(
        request, actor, r.CANCEL, lambda _: build(r.RunIdRequest, run_id=run_id), f"/runs/{run_id}", "Cancel requested."
    )


@router.get("/runs/{run_id}/files/{path:path}")
async def run_file(request: Request, run_id: str, path: str, actor: Actor = Depends(signed_in)) -> Response:
    client = bus_of(request)
    reply = await client.call(r.READ_FILE, build(r.ReadFileRequest, run_id=run_id, path=path), actor=actor)
    run = await client.call(r.GET_RUN, build(r.RunIdRequest, run_id=run_id), actor=actor)
    ws = await optional(get_workspace(client, actor, run.workspace_id))
    return render(request, "run_file.html", run=run, ws=ws, path=path, text=reply.text)


@router.get("/runs/{run_id}/report")
async def report_page(request: Request, run_id: str, actor: Actor = Depends(signed_in)) -> Response:
    """The run's report read inside the workbench (its styles, its links, a way back); the retained HTML
    file is offered as a download, since the sandbox it is served in carries no sign-in to links it holds."""
    client = bus_of(request)
    run = await client.call(r.GET_RUN, build(r.RunIdRequest, run_id=run_id), actor=actor)
    answer, report, answer_error = await _answer(client, actor, run)
    if answer is None:
        raise NotFound(answer_error or "this run has no answer yet", {"run_id": run_id})
    ws = await optional(get_workspace(client, actor, run.workspace_id))
    return render(request, "report.html", run=run, ws=ws, answer=answer, report=report)
