"""`dossier publication create|show|read|revise|withdraw|diff`: publications and their exact versions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dossier_cli.client import UsageProblem, client, seg
from dossier_cli.commands import command, read_text
from dossier_cli.output import emit, out, record, ref, table

publication = typer.Typer(help="Publications and their immutable versions.", no_args_is_help=True)

PublicationId = Annotated[str, typer.Argument(metavar="PUBLICATION", help="A publication id (pub_...).")]
BodyFile = Annotated[Path, typer.Option(metavar="FILE", help="The body, from a UTF-8 file ('-' for stdin).")]


def register(app: typer.Typer) -> None:
    app.add_typer(publication, name="publication")


def _path(pub_id: str, tail: str = "") -> str:
    return f"/v1/publications/{seg(pub_id)}{tail}"


def show_version(v: dict[str, Any]) -> None:
    record(
        {
            "id": f"{v['id']}@{v['version']}",
            "title": v["title"],
            "status": v["status"],
            "content_hash": v["content_hash"],
            "run": v.get("run_id"),
            "sources": ", ".join(ref(s) for s in v.get("sources") or []) or "-",
            "created_at": v["created_at"],
        }
    )
    console = out()
    console.print()
    console.print(v["body"])


def show_summary(p: dict[str, Any]) -> None:
    out().print(f"{p['id']}  {p['title']}  (latest v{p['latest_version']})")
    rows = [
        (v["version"], v["status"], v["content_hash"][:16], v.get("run_id"), v["created_at"]) for v in p["versions"]
    ]
    table(("VERSION", "STATUS", "HASH", "RUN", "CREATED"), rows)


@command(publication, "create")
def create(
    title: Annotated[str, typer.Option(help="The title.")],
    body_file: BodyFile,
    workspace_id: Annotated[str | None, typer.Option("--workspace", help="Associate it with this workspace.")] = None,
) -> None:
    """Publish a body as version 1."""
    body: dict[str, Any] = {"title": title, "body": read_text(body_file)}
    if workspace_id:
        body["workspace_id"] = workspace_id
    with client() as api:
        emit(api.json("POST", "/v1/publications", json=body), show_version)


@command(publication, "show")
def show(
    pub_id: PublicationId,
    version: Annotated[int | None, typer.Option(help="Read this exact version instead of the summary.")] = None,
) -> None:
    """A publication's versions, or one exact version with --version."""
    with client() as api:
        if version is None:
            emit(api.get(_path(pub_id)), show_summary)
        else:
            emit(api.get(_path(pub_id, f"/versions/{version}")), show_version)


@command(publication, "read")
def read(
    pub_id: PublicationId,
    version: Annotated[str, typer.Argument(metavar="VERSION", help="A version number, or 'latest'.")] = "latest",
) -> None:
    """One exact version's body and sources (latest only when asked for)."""
    with client() as api:
        if version == "latest":
            number = int(api.get(_path(pub_id))["latest_version"])
        elif version.isdigit():
            number = int(version)
        else:
            raise UsageProblem(f"VERSION is a number or 'latest', not {version!r}")
        emit(api.get(_path(pub_id, f"/versions/{number}")), show_version)


@command(publication, "claims")
def claims(pub_id: PublicationId, version: Annotated[int, typer.Argument(metavar="VERSION")]) -> None:
    """Every cited sentence of a version, checked against the passage it cites."""
    with client() as api:
        data = api.collect(_path(pub_id, f"/versions/{version}/claims"))

    def human(data: dict[str, Any]) -> None:
        rows = [
            (c["support"], f"{c['score']:.2f}", ", ".join(ref(r) for r in c["refs"]), c["text"]) for c in data["items"]
        ]
        table(("SUPPORT", "SCORE", "CITES", "CLAIM"), rows)

    emit(data, human)


@command(publication, "revise")
def revise(
    pub_id: PublicationId,
    body_file: BodyFile,
    title: Annotated[str | None, typer.Option(help="A new title (default: keep it).")] = None,
    expected_latest_version: Annotated[
        int | None,
        typer.Option(
            help="The latest version you revise (default: the current one; a concurrent one still conflicts)."
        ),
    ] = None,
) -> None:
    """Publish a new version."""
    text = read_text(body_file)
    with client() as api:
        if expected_latest_version is None:
            expected_latest_version = int(api.get(_path(pub_id))["latest_version"])
        body: dict[str, Any] = {"body": text, "expected_latest_version": expected_latest_version}
        if title:
            body["title"] = title
        emit(api.json("POST", _path(pub_id, "/versions"), json=body), show_version)


@command(publication, "withdraw")
def withdraw(
    pub_id: PublicationId,
    version: Annotated[int, typer.Argument(metavar="VERSION")],
    reason: Annotated[str, typer.Option(help="Why (kept with the version).")],
) -> None:
    """Withdraw one version: reads of it answer unavailable(withdrawn) from now on."""
    with client() as api:
        emit(api.json("POST", _path(pub_id, f"/versions/{version}/withdraw"), json={"reason": reason}), show_version)


MARKS = {"context": " ", "removed": "-", "added": "+"}


def show_diff(diff: dict[str, Any]) -> None:
    console = out()
    console.print(f"--- {diff['id']}@{diff['from']}\n+++ {diff['id']}@{diff['to']}", markup=False, highlight=False)
    for hunk in diff["hunks"]:
        header = f"@@ -{hunk['from_start']},{hunk['from_count']} +{hunk['to_start']},{hunk['to_count']} @@"
        console.print(header, markup=False, highlight=False)
        for line in hunk["lines"]:
            console.print(f"{MARKS.get(line['op'], ' ')}{line['text']}", markup=False, highlight=False)
    if diff.get("truncated"):
        console.print("(cut at the service's line bound)", markup=False)


@command(publication, "diff")
def diff(
    pub_id: PublicationId,
    from_version: Annotated[int, typer.Argument(metavar="FROM", help="The older version.")],
    to_version: Annotated[int, typer.Argument(metavar="TO", help="The newer version.")],
) -> None:
    """A line diff of two versions' bodies (unified format; --json for the hunks)."""
    with client() as api:
        emit(api.get(_path(pub_id, "/diff"), **{"from": from_version, "to": to_version}), show_diff)
