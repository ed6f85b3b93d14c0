"""Workspace pages: the list, one workspace (goal with CAS, lifecycle, catalog, checkpoint, runs), new runs."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import ValidationError

from services.gateway.web.render import (
    WebRoute,
    bus_of,
    checked_form,
    field,
    go,
    number,
    problem,
    render,
    signed_in,
)
from shared.bus import BusClient, validation_details
from shared.contracts import publication as p
from shared.contracts import runhost as r
from shared.contracts import workspace as c
from shared.contracts.common import Actor, Model
from shared.errors import HTTP_STATUS, Conflict, DomainError, Invalid, NotFound

router = APIRouter(route_class=WebRoute, include_in_schema=False, dependencies=[Depends(signed_in)])

# The catalog is shown a page at a time; the history picker offers a few publications a page, each with its
# latest versions (older ones are a click away, on the publication's page).
CATALOG_PAGE = 50
CATALOG_KINDS = ("publication", "source", "artifact")
HISTORY_PAGE = 10
HISTORY_VERSIONS = 5


def build(model: type[Model], **data: Any) -> Any:
    """A contract built from form fields; a malformed field is `invalid`, named, like the API says."""
    try:
        return model(**data)
    except ValidationError as exc:
        details = validation_details(exc)
        raise Invalid(f"{details['field']}: {details['problem']}", details) from exc


async def paged(client: BusClient, subject: str, data: dict[str, Any], actor: Actor, cursor: str | None) -> Any:
    """One page of a list; the cursor is sent only when the user followed a `next_cursor`."""
    return await client.call_raw(subject, {**data, "cursor": cursor} if cursor else data, actor=actor)


@router.get("/workspaces")
async def workspaces(request: Request, cursor: str | None = None, actor: Actor = Depends(signed_in)) -> Response:
    page = await paged(bus_of(request), c.LIST, {}, actor, cursor)
    return render(request, "workspaces.html", page=page)


@router.post("/workspaces")
async def create(request: Request, actor: Actor = Depends(signed_in)) -> Response:
    form = await checked_form(request)
    values = {"title": field(form, "title"), "goal": field(form, "goal").replace("\r\n", "\n")}
    try:
        ws = await bus_of(request).call_raw(c.CREATE, build(c.CreateRequest, **values), actor=actor)
    except DomainError as exc:
        page = await paged(bus_of(request), c.LIST, {}, actor, None)
        errors = problem(exc, {"title": "title", "goal": "goal"}, "title")
        return render(request, "workspaces.html", status=exc_status(exc), page=page, errors=errors, values=values)
    return go(f"/workspaces/{ws['id']}", "Workspace created.")


async def _optional(call: Any) -> Any:
    try:
        return await call
    except NotFound:
        return None


async def _history_choices(client: BusClient, actor: Actor, ids: list[str]) -> list[dict[str, Any]]:
    """These publications with their recent versions, so a run can be pointed at an earlier one."""
    found = await asyncio.gather(*(_optional(client.call_raw(p.GET, {"id": i}, actor=actor)) for i in ids))
    choices = []
    for pub in found:
        if pub is None:
            continue
        versions = sorted(pub["versions"], key=lambda v: v["version"], reverse=True)
        choices.append(
            {**pub, "shown": versions[:HISTORY_VERSIONS], "hidden": max(0, len(versions) - HISTORY_VERSIONS)}
        )
    return choices


def _browse(workspace_id: str, limit: int, **query: str | None) -> dict[str, Any]:
    return {"workspace_id": workspace_id, "limit": limit, **{k: v for k, v in query.items() if v}}


async def workspace_view(
    request: Request, actor: Actor, workspace_id: str, *, status: int = 200, **extra: Any
) -> Response:
    """The workspace page. Its query pages the catalog (`kind`, `cursor`) and the history picker (`history_q`,
    `history_cursor`), and carries what the ask form held (`question`, `picked`) across those pages."""
    client = bus_of(request)
    query = request.query_params
    ws = await client.call_raw(c.GET, {"workspace_id": workspace_id}, actor=actor)
    ref = {"workspace_id": workspace_id}
    kind = query.get("kind") if query.get("kind") in CATALOG_KINDS else None
    history_q = query.get("history_q", "").strip()[:200]
    versions, catalog, history, checkpoint, runs = await asyncio.gather(
        client.call_raw(c.GOAL_VERSIONS, ref, actor=actor),
        client.call_raw(
            c.CATALOG_BROWSE, _browse(workspace_id, CATALOG_PAGE, kind=kind, cursor=query.get("cursor")), actor=actor
        ),
        client.call_raw(
            c.CATALOG_BROWSE,
            _browse(workspace_id, HISTORY_PAGE, kind="publication", q=history_q, cursor=query.get("history_cursor")),
            actor=actor,
        ),
        _optional(client.call_raw(c.CHECKPOINT_GET, ref, actor=actor)),
        client.call_raw(r.LIST_RUNS, ref, actor=actor),
    )
    picked = list(extra.pop("picked", None) or query.getlist("picked"))[: r.HISTORY_MAX]
    shown = [i["id"] for i in history["items"]]
    elsewhere = [pick for pick in picked if pick.rpartition("@")[0] not in shown]
    others = await _history_choices(client, actor, list(dict.fromkeys(pick.rpartition("@")[0] for pick in elsewhere)))
    titles = {pub["id"]: pub["title"] for pub in others}
    extra.setdefault("question_draft", query.get("question", ""))
    return render(
        request,
        "workspace.html",
        status=status,
        ws=ws,
        versions=versions["items"],
        catalog=catalog,
        kind=kind,
        first_page=not query.get("cursor"),
        history=history,
        history_q=history_q,
        choices=await _history_choices(client, actor, shown),
        picked=picked,
        elsewhere=[
            {
                "value": v,
                "title": titles.get(v.rpartition("@")[0], v.rpartition("@")[0]),
                "version": v.rpartition("@")[2],
            }
            for v in elsewhere
        ],
        checkpoint=checkpoint,
        runs=runs,
        request_id=uuid.uuid4().hex,
        **extra,
    )


@router.get("/workspaces/{workspace_id}")
async def workspace(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    return await workspace_view(request, actor, workspace_id)


@router.post("/workspaces/{workspace_id}/goal")
async def revise_goal(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    form = await checked_form(request)
    text, expected = field(form, "goal").replace("\r\n", "\n"), number(form, "expected_version")
    try:
        req = build(c.ReviseGoalRequest, workspace_id=workspace_id, text=text, expected_version=expected)
        await bus_of(request).call_raw(c.REVISE_GOAL, req, actor=actor)
    except Conflict as exc:
        # Nothing typed is lost: the page comes back with the text in the form and the current goal beside it.
        return await workspace_view(request, actor, workspace_id, status=409, conflict=exc, goal_draft=text)
    except DomainError as exc:
        errors = problem(exc, {"text": "goal"}, "goal")
        return await workspace_view(
            request, actor, workspace_id, status=exc_status(exc), errors=errors, goal_draft=text
        )
    return go(f"/workspaces/{workspace_id}", "Goal saved.")


def exc_status(exc: DomainError) -> int:
    return HTTP_STATUS.get(exc.code, 500)


@router.get("/workspaces/{workspace_id}/archive")
async def confirm_archive(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    ws = await bus_of(request).call_raw(c.GET, {"workspace_id": workspace_id}, actor=actor)
    return render(request, "confirm_archive.html", ws=ws)


@router.post("/workspaces/{workspace_id}/archive")
async def archive(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    await checked_form(request)
    await bus_of(request).call_raw(c.ARCHIVE, {"workspace_id": workspace_id}, actor=actor)
    return go(f"/workspaces/{workspace_id}", "Workspace archived: it takes no new runs until it is unarchived.")


@router.post("/workspaces/{workspace_id}/unarchive")
async def unarchive(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    await checked_form(request)
    await bus_of(request).call_raw(c.UNARCHIVE, {"workspace_id": workspace_id}, actor=actor)
    return go(f"/workspaces/{workspace_id}", "Workspace unarchived.")


@router.get("/workspaces/{workspace_id}/delete")
async def confirm_delete(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    ws = await bus_of(request).call_raw(c.GET, {"workspace_id": workspace_id}, actor=actor)
    return render(request, "confirm_delete.html", ws=ws)


@router.post("/workspaces/{workspace_id}/delete")
async def delete(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    await checked_form(request)
    await bus_of(request).call_raw(c.DELETE, {"workspace_id": workspace_id}, actor=actor)
    return go("/workspaces", "Workspace deleted. Its runs, publications and sources stay readable.")


@router.post("/workspaces/{workspace_id}/runs")
async def start_run(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    form = await checked_form(request)
    picked = form.get("history", [])
    picks = [picked] if isinstance(picked, str) else picked
    history = []
    for choice in picks:
        pub_id, _, version = choice.rpartition("@")
        if not pub_id or not version.isdigit():
            raise Invalid("a history choice must name a publication version", {"field": "history"})
        history.append({"publication_id": pub_id, "version": int(version)})
    question = field(form, "question")
    try:
        req = build(
            r.AdmitRequest,
            workspace_id=workspace_id,
            question=question,
            request_id=field(form, "request_id") or uuid.uuid4().hex,
            history=history,
        )
        reply = await bus_of(request).call_raw(r.ADMIT, req, actor=actor)
    except (Invalid, Conflict) as exc:
        # The question and the picks come back as typed, the refusal beside the question.
        errors = problem(exc, {}, "question")
        return await workspace_view(
            request, actor, workspace_id, status=exc_status(exc), errors=errors, question_draft=question, picked=picks
        )
    return go(f"/runs/{reply['run']['id']}")


@router.post("/workspaces/{workspace_id}/publications")
async def publish(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    form = await checked_form(request)
    title, body = field(form, "title"), field(form, "body").replace("\r\n", "\n")
    try:
        req = build(p.CommitRequest, title=title, body=body, workspace_id=workspace_id)
        version = await bus_of(request).call_raw(p.COMMIT, req, actor=actor)
    except (Invalid, Conflict) as exc:
        errors = problem(exc, {"title": "pub-title", "body": "pub-body"}, "pub-title")
        drafts = {"title": title, "body": body}
        return await workspace_view(
            request, actor, workspace_id, status=exc_status(exc), errors=errors, pub_draft=drafts
        )
    return go(f"/publications/{version['id']}/versions/{version['version']}", "Publication saved.")
