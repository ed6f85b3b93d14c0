"""Workspace pages: the list, one workspace (goal with CAS, lifecycle, catalog, checkpoint, runs), new runs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from services.gateway.web.bottomline import latest_answer
from services.gateway.web.render import (
    WebRoute,
    build,
    bus_of,
    checked_form,
    exc_status,
    field,
    go,
    number,
    optional,
    problem,
    render,
    signed_in,
    submit,
)
from shared.bus import BusClient
from shared.contracts import publication as p
from shared.contracts import runhost as r
from shared.contracts import workspace as c
from shared.contracts.common import Actor
from shared.errors import Conflict, DomainError, Invalid

router = APIRouter(route_class=WebRoute, include_in_schema=False, dependencies=[Depends(signed_in)])

# The catalog is shown a page at a time; the history picker offers a few publications a page, each with its
# latest versions (older ones are a click away, on the publication's page).
CATALOG_PAGE = 50
CATALOG_KINDS = ("publication", "source", "artifact")
HISTORY_PAGE = 10
HISTORY_VERSIONS = 5


async def get_workspace(client: BusClient, actor: Actor, workspace_id: str) -> c.Workspace:
    return await client.call(c.GET, build(c.WorkspaceIdRequest, workspace_id=workspace_id), actor=actor)


def _named(workspace_id: str) -> Callable[[dict[str, Any]], c.WorkspaceIdRequest]:
    """The request of a lifecycle form (archive, unarchive, delete): the workspace its address names."""
    return lambda _: build(c.WorkspaceIdRequest, workspace_id=workspace_id)


@router.get("/workspaces")
async def workspaces(request: Request, cursor: str | None = None, actor: Actor = Depends(signed_in)) -> Response:
    # An empty cursor is the first page, as no cursor is.
    page = await bus_of(request).call(c.LIST, build(c.ListRequest, cursor=cursor or None), actor=actor)
    return render(request, "workspaces.html", page=page)


@router.post("/workspaces")
async def create(request: Request, actor: Actor = Depends(signed_in)) -> Response:
    form = await checked_form(request)
    values = {"title": field(form, "title"), "goal": field(form, "goal").replace("\r\n", "\n")}
    client = bus_of(request)
    try:
        ws = await client.call(c.CREATE, build(c.CreateRequest, **values), actor=actor)
    except DomainError as exc:
        page = await client.call(c.LIST, c.ListRequest(), actor=actor)
        errors = problem(exc, {"title": "title", "goal": "goal"}, "title")
        return render(request, "workspaces.html", status=exc_status(exc), page=page, errors=errors, values=values)
    return go(f"/workspaces/{ws.id}", "Workspace created.")


async def _history_choices(client: BusClient, actor: Actor, ids: list[str]) -> list[dict[str, Any]]:
    """These publications with their recent versions, so a run can be pointed at an earlier one."""
    # Every request is built before any is sent: a malformed id leaves no call unawaited.
    requests = [build(p.GetRequest, id=i) for i in ids]
    found = await asyncio.gather(*map(optional, [client.call(p.GET, req, actor=actor) for req in requests]))
    choices = []
    for pub in filter(None, found):
        versions = sorted(pub.versions, key=lambda v: v.version, reverse=True)
        choices.append(
            {"pub": pub, "shown": versions[:HISTORY_VERSIONS], "hidden": max(0, len(versions) - HISTORY_VERSIONS)}
        )
    return choices


def browse(workspace_id: str, limit: int, **query: str | None) -> c.CatalogBrowseRequest:
    """A page of the workspace's catalog; an empty filter or cursor is none."""
    return build(
        c.CatalogBrowseRequest, workspace_id=workspace_id, limit=limit, **{k: v for k, v in query.items() if v}
    )


async def workspace_view(
    request: Request, actor: Actor, workspace_id: str, *, status: int = 200, **extra: Any
) -> Response:
    """The workspace page. Its query pages the catalog (`kind`, `cursor`) and the history picker (`history_q`,
    `history_cursor`), and carries what the ask form held (`question`, `picked`) across those pages."""
    client = bus_of(request)
    query = request.query_params
    ref = build(c.WorkspaceIdRequest, workspace_id=workspace_id)
    ws = await client.call(c.GET, ref, actor=actor)
    kind = query.get("kind") if query.get("kind") in CATALOG_KINDS else None
    history_q = query.get("history_q", "").strip()[:200]
    catalog_page = browse(workspace_id, CATALOG_PAGE, kind=kind, cursor=query.get("cursor"))
    history_page = browse(
        workspace_id, HISTORY_PAGE, kind="publication", q=history_q, cursor=query.get("history_cursor")
    )
    checkpoint_read = client.call(c.CHECKPOINT_GET, ref, actor=actor)
    versions, catalog, history, checkpoint, runs = await asyncio.gather(
        client.call(c.GOAL_VERSIONS, c.WorkspacePageRequest(workspace_id=workspace_id), actor=actor),
        client.call(c.CATALOG_BROWSE, catalog_page, actor=actor),
        client.call(c.CATALOG_BROWSE, history_page, actor=actor),
        optional(checkpoint_read),
        client.call(r.LIST_RUNS, r.ListRunsRequest(workspace_id=workspace_id), actor=actor),
    )
    picked = list(extra.pop("picked", None) or query.getlist("picked"))[: r.HISTORY_MAX]
    shown = [i.id for i in history.items]
    elsewhere = [pick for pick in picked if pick.rpartition("@")[0] not in shown]
    others = await _history_choices(client, actor, list(dict.fromkeys(pick.rpartition("@")[0] for pick in elsewhere)))
    titles = {choice["pub"].id: choice["pub"].title for choice in others}
    extra.setdefault("question_draft", query.get("question", ""))
    return render(
        request,
        "workspace.html",
        status=status,
        ws=ws,
        versions=versions.items,
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
        latest=await latest_answer(client, actor, ws, runs.items),
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
        await bus_of(request).call(c.REVISE_GOAL, req, actor=actor)
    except Conflict as exc:
        # Nothing typed is lost: the page comes back with the text in the form and the current goal beside it.
        return await workspace_view(request, actor, workspace_id, status=409, conflict=exc, goal_draft=text)
    except DomainError as exc:
        errors = problem(exc, {"text": "goal"}, "goal")
        return await workspace_view(
            request, actor, workspace_id, status=exc_status(exc), errors=errors, goal_draft=text
        )
    return go(f"/workspaces/{workspace_id}", "Goal saved.")


@router.get("/workspaces/{workspace_id}/archive")
async def confirm_archive(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    ws = await get_workspace(bus_of(request), actor, workspace_id)
    return render(request, "confirm_archive.html", ws=ws)


@router.post("/workspaces/{workspace_id}/archive")
async def archive(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    notice = "Workspace archived: it takes no new runs until it is unarchived."
    return await submit(request, actor, c.ARCHIVE, _named(workspace_id), f"/workspaces/{workspace_id}", notice)


@router.post("/workspaces/{workspace_id}/unarchive")
async def unarchive(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    notice = "Workspace unarchived."
    return await submit(request, actor, c.UNARCHIVE, _named(workspace_id), f"/workspaces/{workspace_id}", notice)


@router.get("/workspaces/{workspace_id}/delete")
async def confirm_delete(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    ws = await get_workspace(bus_of(request), actor, workspace_id)
    return render(request, "confirm_delete.html", ws=ws)


@router.post("/workspaces/{workspace_id}/delete")
async def delete(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    notice = "Workspace deleted. Its runs, publications and sources stay readable."
    return await submit(request, actor, c.DELETE, _named(workspace_id), "/workspaces", notice)


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
        reply = await bus_of(request).call(r.ADMIT, req, actor=actor)
    except (Invalid, Conflict) as exc:
        # The question and the picks come back as typed, the refusal beside the question.
        errors = problem(exc, {}, "question")
        return await workspace_view(
            request, actor, workspace_id, status=exc_status(exc), errors=errors, question_draft=question, picked=picks
        )
    return go(f"/runs/{reply.run.id}")


@router.post("/workspaces/{workspace_id}/publications")
async def publish(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    form = await checked_form(request)
    title, body = field(form, "title"), field(form, "body").replace("\r\n", "\n")
    try:
        req = build(p.CommitRequest, title=title, body=body, workspace_id=workspace_id)
        version = await bus_of(request).call(p.COMMIT, req, actor=actor)
    except (Invalid, Conflict) as exc:
        errors = problem(exc, {"title": "pub-title", "body": "pub-body"}, "pub-title")
        drafts = {"title": title, "body": body}
        return await workspace_view(
            request, actor, workspace_id, status=exc_status(exc), errors=errors, pub_draft=drafts
        )
    return go(f"/publications/{version.id}/versions/{version.version}", "Publication saved.")
