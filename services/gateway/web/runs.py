"""Run pages: live status, plan.md (editable mid-run), the ledger, the working files, cancel, the answer."""

from __future__ import annotations

import asyncio
import uuid

from fastapi import APIRouter, Depends, Request, Response

from services.gateway.web.bottomline import (
    answer_changes,
    bottom_line,
    claims_of,
    known_of,
    ledger_locators,
    ref_titles,
    titles_of,
)
from services.gateway.web.render import (
    WebRoute,
    build,
    bus_of,
    checked_form,
    field,
    go,
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
from shared.errors import DomainError, Invalid, NotFound

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


STAGES = ("listed", "read", "included", "unavailable", "replayed")
# A ledger shown by one stage is read a page at a time until this many of its rows are found, or this many
# pages are read.
STAGE_ROWS = 100
STAGE_PAGES = 20


async def _ledger(client: BusClient, actor: Actor, run_id: str, cursor: str | None, stage: str | None) -> r.Ledger:
    """A page of the run's ledger; by one `stage`, the rows of that stage in the next pages, with the cursor
    to go on from."""
    page = await client.call(r.LEDGER, build(r.RunPageRequest, run_id=run_id, cursor=cursor or None), actor=actor)
    if stage not in STAGES:
        return page
    rows = [row for row in page.items if row.stage == stage]
    for _ in range(STAGE_PAGES - 1):
        if len(rows) >= STAGE_ROWS or not page.next_cursor:
            break
        page = await client.call(r.LEDGER, r.RunPageRequest(run_id=run_id, cursor=page.next_cursor), actor=actor)
        rows += [row for row in page.items if row.stage == stage]
    return r.Ledger(items=rows, next_cursor=page.next_cursor, totals=page.totals)


@router.get("/runs/{run_id}")
async def run_page(
    request: Request,
    run_id: str,
    cursor: str | None = None,
    stage: str | None = None,
    actor: Actor = Depends(signed_in),
) -> Response:
    return await _run_page(request, run_id, actor, cursor, stage=stage if stage in STAGES else None)


@router.get("/runs/{run_id}/steps/{request_id}")
async def step_page(request: Request, run_id: str, request_id: str, actor: Actor = Depends(signed_in)) -> Response:
    """One model request of the run: what the ledger says it was given (each passage it included, at its
    version and hash) and, for a run a model drove, the model's answer from the journal (its tool calls) and
    each call's result as the model's window showed it."""
    client = bus_of(request)
    run = await client.call(r.GET_RUN, build(r.RunIdRequest, run_id=run_id), actor=actor)
    name = request_id if ":" in request_id else f"{run_id}:{request_id}"
    rows: list[r.LedgerRow] = []
    cursor = None
    for _ in range(STAGE_PAGES):
        page = await client.call(r.LEDGER, r.RunPageRequest(run_id=run_id, cursor=cursor), actor=actor)
        rows += [row for row in page.items if row.model_request in (name, request_id)]
        cursor = page.next_cursor
        if not cursor:
            break
    journal = await client.call(r.STEP, build(r.StepRequest, run_id=run_id, request_id=name), actor=actor)
    if not rows and not journal.items:
        raise NotFound(f"this run made no model request {request_id!r}", {"run_id": run_id})
    ws = await optional(get_workspace(client, actor, run.workspace_id))
    steps = [
        {"step": step, "calls": [step.response, *step.response.get("siblings", [])], "results": step.results}
        for step in journal.items
    ]
    return render(
        request,
        "step.html",
        run=run,
        ws=ws,
        step=name.removeprefix(f"{run_id}:"),
        rows=rows,
        steps=steps,
        titles=titles_of(run),
    )


async def _current_history(client: BusClient, actor: Actor, run: r.Run) -> list[r.HistoryRef]:
    """The run's chosen history at each publication's newest active version now (one withdrawn throughout is
    left out)."""
    reads = [client.call(p.GET, p.GetRequest(id=h.publication_id), actor=actor) for h in run.history]
    found = await asyncio.gather(*(optional(read, DomainError) for read in reads))
    history = []
    for pub in filter(None, found):
        active = [v.version for v in pub.versions if v.status == "active"]
        if active:
            history.append(r.HistoryRef(publication_id=pub.id, version=max(active)))
    return history


@router.post("/runs/{run_id}/rerun")
async def rerun(request: Request, run_id: str, actor: Actor = Depends(signed_in)) -> Response:
    """The same question asked again on the current versions: its chosen history at each publication's newest
    version, in the same conversation, so the new run follows this one."""
    form = await checked_form(request)
    client = bus_of(request)
    run = await client.call(r.GET_RUN, build(r.RunIdRequest, run_id=run_id), actor=actor)
    if run.driver == "external":
        raise Invalid("an outside agent's run is asked again by the agent, not re-run here", {"run_id": run_id})
    req = build(
        r.AdmitRequest,
        workspace_id=run.workspace_id,
        question=run.question,
        request_id=field(form, "request_id") or uuid.uuid4().hex,
        history=await _current_history(client, actor, run),
        model=run.model,
        conversation_id=run.conversation_id,
    )
    reply = await client.call(r.ADMIT, req, actor=actor)
    return go(f"/runs/{reply.run.id}", "Asked again on the current versions: this run follows the earlier one.")


async def _neighbours(
    client: BusClient, actor: Actor, run: r.Run
) -> tuple[r.ConversationRun | None, r.ConversationRun | None]:
    """The runs of the same conversation just before and just after this one (its first page)."""
    request = r.ConversationRequest(conversation_id=run.conversation_id)
    conversation = await optional(client.call(r.GET_CONVERSATION, request, actor=actor), DomainError)
    runs = conversation.runs if conversation else []
    at = next((i for i, other in enumerate(runs) if other.id == run.id), None)
    if at is None:
        return None, None
    return (runs[at - 1] if at > 0 else None), (runs[at + 1] if at + 1 < len(runs) else None)


@router.post("/runs/{run_id}/take")
async def take_over(request: Request, run_id: str, actor: Actor = Depends(signed_in)) -> Response:
    """A person takes an external run over: its new lease token is shown on this page, once."""
    await checked_form(request)
    req = build(r.TakeRequest, run_id=run_id, force=True)
    taken = await bus_of(request).call(r.EXTERNAL_TAKE, req, actor=actor)
    return await _run_page(request, run_id, actor, None, taken=taken.lease)


async def _run_page(
    request: Request,
    run_id: str,
    actor: Actor,
    cursor: str | None,
    *,
    taken: r.Lease | None = None,
    stage: str | None = None,
) -> Response:
    client = bus_of(request)
    run = await client.call(r.GET_RUN, build(r.RunIdRequest, run_id=run_id), actor=actor)
    # An empty cursor is the first page, as no cursor is.
    plan_read = client.call(r.READ_FILE, r.ReadFileRequest(run_id=run_id, path="plan.md"), actor=actor)
    ledger, files, plan, ws = await asyncio.gather(
        _ledger(client, actor, run_id, cursor, stage),
        client.call(r.LIST_FILES, r.RunPageRequest(run_id=run_id), actor=actor),
        optional(plan_read),
        optional(get_workspace(client, actor, run.workspace_id)),
    )
    answer, report, answer_error = await _answer(client, actor, run)
    changes, claims, (_, read) = await asyncio.gather(
        answer_changes(client, actor, run.workspace_id, answer),
        claims_of(client, actor, answer),
        ledger_locators(client, actor, run.id if answer else None),
    )
    known = known_of(read)
    follows, followed_by = await _neighbours(client, actor, run)
    cited = [d.ref for d in changes] + [b for d in changes for b in d.cited_by]
    titles = await ref_titles(client, actor, cited, titles_of(run))
    return render(
        request,
        "run.html",
        changes=changes,
        claims=claims,
        bottom=bottom_line(run, answer, claims, known, ws),
        known=known,
        run=run,
        ws=ws,
        titles=titles,
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
        stage=stage,
        stages=STAGES,
        follows=follows,
        followed_by=followed_by,
        request_id=uuid.uuid4().hex,
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
    _, read = await ledger_locators(client, actor, run.id)
    return render(request, "report.html", run=run, ws=ws, answer=answer, report=report, known=known_of(read))
