"""`dossier workspace ...` and `dossier checkpoint ...`: goals, lifecycle, catalog, associations, progress."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from dossier_cli.client import Client, CliError, UsageProblem, client, seg
from dossier_cli.commands import command, default_group, read_text
from dossier_cli.output import cell, emit, err, out, record, ref, table

workspace = typer.Typer(help="Workspaces: a goal that outlives every run.", no_args_is_help=True)
checkpoint = typer.Typer(
    cls=default_group("show"),
    help="A workspace's research progress (advisory). `dossier checkpoint WS` is `dossier checkpoint show WS`.",
    no_args_is_help=True,
)

WorkspaceId = Annotated[str, typer.Argument(metavar="WORKSPACE", help="A workspace id (ws_...).")]


def register(app: typer.Typer) -> None:
    app.add_typer(workspace, name="workspace")
    app.add_typer(checkpoint, name="checkpoint")


def _path(workspace_id: str, tail: str = "") -> str:
    return f"/v1/workspaces/{seg(workspace_id)}{tail}"


def show_workspace(ws: dict[str, Any]) -> None:
    goal = ws.get("goal") or {}
    record(
        {
            "id": ws.get("id"),
            "title": ws.get("title"),
            "status": ws.get("status"),
            "goal": f"v{goal.get('version')}: {goal.get('text')}",
            "created_at": ws.get("created_at"),
            "updated_at": ws.get("updated_at"),
        }
    )


@command(workspace, "create")
def create(
    title: Annotated[str, typer.Option(help="A short name.")],
    goal: Annotated[str, typer.Option(help="The goal's first version.")],
) -> None:
    """Create a workspace with its first goal."""
    with client() as api:
        emit(api.json("POST", "/v1/workspaces", json={"title": title, "goal": goal}), show_workspace)


@command(workspace, "list")
def list_workspaces() -> None:
    """The workspaces of your scope."""
    with client() as api:
        data = api.collect("/v1/workspaces")

    def human(data: dict[str, Any]) -> None:
        rows = [(w["id"], w["status"], f"v{w['goal']['version']}", w["title"]) for w in data["items"]]
        table(("ID", "STATUS", "GOAL", "TITLE"), rows)

    emit(data, human)


@command(workspace, "show")
def show(workspace_id: WorkspaceId) -> None:
    """One workspace."""
    with client() as api:
        emit(api.get(_path(workspace_id)), show_workspace)


def _versions(data: dict[str, Any]) -> None:
    table(("VERSION", "CREATED", "TEXT"), [(v["version"], v["created_at"], v["text"]) for v in data["items"]])


@command(workspace, "goal")
def goal(
    workspace_id: WorkspaceId,
    text: Annotated[
        str | None, typer.Argument(help="The new goal; without it, the goal's versions are listed.")
    ] = None,
    expected_version: Annotated[
        int | None,
        typer.Option(help="The version you replace (default: the current one; a concurrent change still conflicts)."),
    ] = None,
) -> None:
    """The goal's versions (oldest first), or, with TEXT, a new version of the goal."""
    with client() as api:
        if text is None:
            emit(api.collect(_path(workspace_id, "/goal/versions")), _versions)
            return
        if expected_version is None:
            expected_version = int(api.get(_path(workspace_id))["goal"]["version"])
        body = {"text": text, "expected_version": expected_version}
        emit(api.json("PUT", _path(workspace_id, "/goal"), json=body), show_workspace)


@command(workspace, "archive")
def archive(workspace_id: WorkspaceId) -> None:
    """Take no new runs or associations (runs already admitted still finish)."""
    with client() as api:
        emit(api.json("POST", _path(workspace_id, "/archive")), show_workspace)


@command(workspace, "unarchive")
def unarchive(workspace_id: WorkspaceId) -> None:
    """Undo an archive."""
    with client() as api:
        emit(api.json("POST", _path(workspace_id, "/unarchive")), show_workspace)


@command(workspace, "delete")
def delete(
    workspace_id: WorkspaceId,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask (needed when stdin is not a terminal).")] = False,
) -> None:
    """Delete a workspace for good (its runs, publications, sources and artifacts stay)."""
    if not yes:
        if not sys.stdin.isatty():
            raise UsageProblem("deleting a workspace cannot be undone: pass --yes")
        if not typer.confirm(f"Delete workspace {workspace_id} for good?", err=True):
            raise CliError("not deleted")
    with client() as api:
        api.json("DELETE", _path(workspace_id))
    emit({"id": workspace_id, "deleted": True}, lambda _: err().print(f"deleted {workspace_id}"))


@command(workspace, "catalog")
def catalog(
    workspace_id: WorkspaceId,
    limit: Annotated[int | None, typer.Option(help="At most this many items (the service bounds it).")] = None,
    cursor: Annotated[str | None, typer.Option(help="The next_cursor of the page before.")] = None,
) -> None:
    """What a run in this workspace could read: publications, sources and artifacts, with their availability,
    a page at a time (the analyst's own first, then the runs' conclusions)."""
    with client() as api:
        data = api.get(_path(workspace_id, "/catalog"), limit=limit, cursor=cursor)

    def human(data: dict[str, Any]) -> None:
        rows = [
            (i["kind"], i["id"], i["version"], "yes" if i["available"] else f"no ({i['reason']})", i["title"])
            for i in data["items"]
        ]
        table(("KIND", "ID", "VERSION", "AVAILABLE", "TITLE"), rows)
        out().print(f"complete: {cell(data.get('complete'))}, omitted: {data.get('omitted')}")
        if data.get("next_cursor"):
            out().print(f"next page: --cursor {data['next_cursor']}")

    emit(data, human)


@command(workspace, "drift")
def drift(workspace_id: WorkspaceId) -> None:
    """Refs the checkpoint or the associated publications cite that changed since (new version, withdrawn, retired)."""
    with client() as api:
        data = api.collect(_path(workspace_id, "/drift"))

    def human(data: dict[str, Any]) -> None:
        rows = [
            (
                d["detected_at"],
                ref(d["ref"]),
                d["reason"],
                cell(d["new_version"]),
                ", ".join(ref(c) for c in d["cited_by"]),
            )
            for d in data["items"]
        ]
        table(("DETECTED", "REF", "REASON", "NEW VERSION", "CITED BY"), rows)

    emit(data, human)


@command(workspace, "add-source")
def add_source(workspace_id: WorkspaceId, source_id: Annotated[str, typer.Argument(metavar="SOURCE_ID")]) -> None:
    """Associate a source with the workspace."""
    with client() as api:
        emit(api.json("POST", _path(workspace_id, "/sources"), json={"source_id": source_id}))


@command(workspace, "pin-artifact")
def pin_artifact(workspace_id: WorkspaceId, artifact_id: Annotated[str, typer.Argument(metavar="ARTIFACT_ID")]) -> None:
    """Retain an artifact and associate it (both outcomes are reported)."""
    with client() as api:
        emit(api.json("POST", _path(workspace_id, "/artifacts"), json={"artifact_id": artifact_id}))


@command(workspace, "runs")
def runs(workspace_id: WorkspaceId) -> None:
    """Every run of the workspace, newest first."""
    with client() as api:
        data = api.collect(_path(workspace_id, "/runs"))

    def human(data: dict[str, Any]) -> None:
        rows = [(r["id"], r["status"], r["created_at"], r["question"]) for r in data["items"]]
        table(("ID", "STATUS", "CREATED", "QUESTION"), rows)

    emit(data, human)


# -- checkpoint --------------------------------------------------------------------------------------


def show_checkpoint(cp: dict[str, Any]) -> None:
    console = out()
    console.print(f"revision {cp['revision']} ({cp['status']}, advisory, by {cp['author']}, {cp['created_at']})")
    if cp["status"] == "unavailable":
        console.print("summary withheld: a source it was derived from is no longer available")
        for missing in cp["unavailable_sources"]:
            console.print(f"  - {ref(missing['ref'])}: {missing['reason']}")
    elif cp["summary"] is not None:
        console.print(cp["summary"])
    derived = cp["derived_from"]
    if derived["run_id"] or derived["publication"]:
        pub = derived["publication"]
        console.print(f"derived from run {derived['run_id'] or '-'}, publication {ref(pub) if pub else '-'}")
    for q in cp["open_questions"]:
        mark = "x" if q["status"] == "resolved" else " "
        console.print(f"  [{mark}] {q['id']}  {q['text']}")


def _revisions(data: dict[str, Any]) -> None:
    for number, cp in enumerate(data["items"]):
        if number:
            out().print()
        show_checkpoint(cp)


@command(checkpoint, "show")
def checkpoint_show(
    workspace_id: WorkspaceId,
    revisions: Annotated[bool, typer.Option("--revisions", help="Every revision, oldest first.")] = False,
) -> None:
    """The current checkpoint, re-validated against its sources."""
    with client() as api:
        if revisions:
            emit(api.collect(_path(workspace_id, "/checkpoint/revisions")), _revisions)
        else:
            emit(api.get(_path(workspace_id, "/checkpoint")), show_checkpoint)


@command(checkpoint, "revisions")
def checkpoint_revisions(workspace_id: WorkspaceId) -> None:
    """Every revision of the checkpoint, oldest first."""
    with client() as api:
        emit(api.collect(_path(workspace_id, "/checkpoint/revisions")), _revisions)


@command(checkpoint, "update")
def checkpoint_update(
    workspace_id: WorkspaceId,
    expected_revision: Annotated[
        int | None, typer.Option(help="The revision you replace (default: the current one, 0 when there is none).")
    ] = None,
    summary: Annotated[str | None, typer.Option(help="The new summary.")] = None,
    summary_file: Annotated[Path | None, typer.Option(help="Read the summary from a file ('-' for stdin).")] = None,
    add_question: Annotated[list[str] | None, typer.Option(help="An open question to add (repeatable).")] = None,
    resolve: Annotated[list[str] | None, typer.Option(help="An open question's id to resolve (repeatable).")] = None,
) -> None:
    """Write a new revision: a summary, questions to add, questions to resolve."""
    if summary is not None and summary_file is not None:
        raise UsageProblem("give --summary or --summary-file, not both")
    body: dict[str, Any] = {"add_questions": add_question or [], "resolve_questions": resolve or []}
    if summary_file is not None:
        body["summary"] = read_text(summary_file)
    elif summary is not None:
        body["summary"] = summary
    with client() as api:
        if expected_revision is None:
            expected_revision = _current_revision(api, workspace_id)
        body["expected_revision"] = expected_revision
        emit(api.json("PUT", _path(workspace_id, "/checkpoint"), json=body), show_checkpoint)


def _current_revision(api: Client, workspace_id: str) -> int:
    try:
        return int(api.get(_path(workspace_id, "/checkpoint"))["revision"])
    except CliError as exc:
        if exc.envelope and exc.envelope.get("error", {}).get("code") == "not_found":
            # Either no checkpoint yet (then 0 is right) or no workspace (then the update says so).
            return 0
        raise
