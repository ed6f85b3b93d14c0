"""`dossier ingest`, `dossier import`, `dossier source|asset|evidence ...`: files become versioned evidence."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from dossier_cli.client import Client, CliError, UsageProblem, client, seg, wants_json
from dossier_cli.commands import command
from dossier_cli.output import emit, err, out, print_json, record, table

# An upload's reply waits for extraction; a large file may take a while on a busy machine.
INGEST_TIMEOUT = 600.0

source = typer.Typer(help="Sources: logical documents with numbered versions.", no_args_is_help=True)
asset = typer.Typer(help="Asset versions: one exact version of a source.", no_args_is_help=True)
evidence = typer.Typer(help="Search passages of active versions, or read one.", no_args_is_help=True)

WorkspaceOption = Annotated[str | None, typer.Option("--workspace", help="Associate the source with this workspace.")]


def register(app: typer.Typer) -> None:
    command(app, "ingest")(ingest)
    command(app, "import")(import_file)
    app.add_typer(source, name="source")
    app.add_typer(asset, name="asset")
    app.add_typer(evidence, name="evidence")


def coverage(version: dict[str, Any]) -> str:
    extraction = version.get("extraction") or {}
    if not extraction:
        return "-"
    return f"{extraction['status']} {extraction['units_extracted']}/{extraction['units_total']}"


def show_version(v: dict[str, Any]) -> None:
    record(
        {
            "asset_id": v["asset_id"],
            "source": f"{v['source_id']}@{v['version']}",
            "status": v["status"] + (" (reused)" if v.get("reused") else ""),
            "kind": v["kind"],
            "size": v["size"],
            "content_hash": v["content_hash"],
            "extraction": coverage(v),
            "notes": "; ".join((v.get("extraction") or {}).get("notes") or []) or "-",
            "error": v.get("error"),
            "created_at": v["created_at"],
        }
    )


def show_source(d: dict[str, Any]) -> None:
    out().print(f"source {d['source_id']}, active version: {d['active_version'] or '-'}")
    rows = [
        (v["version"], v["status"], v["kind"], v["size"], coverage(v), v["asset_id"], v["created_at"])
        for v in d["versions"]
    ]
    table(("VERSION", "STATUS", "KIND", "SIZE", "EXTRACTION", "ASSET", "CREATED"), rows)


def printable(text: str) -> str:
    """A file name as the shell gave it, made UTF-8 (bytes that are not become U+FFFD)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _upload(api: Client, path: Path, source_id: str, workspace_id: str | None) -> dict[str, Any]:
    fields = {"source_id": source_id} | ({"workspace_id": workspace_id} if workspace_id else {})
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UsageProblem(f"cannot read {path}: {exc.strerror}") from exc
    with handle:
        reply = api.json(
            "POST", "/v1/assets", data=fields, files={"file": (printable(path.name), handle)}, timeout=INGEST_TIMEOUT
        )
    return dict(reply)


def _row(path: Path, source_id: str, api: Client, workspace_id: str | None) -> dict[str, Any]:
    try:
        version = _upload(api, path, source_id, workspace_id)
    except CliError as exc:
        if exc.exit_code == 3:  # the gateway is gone: every other file would fail the same way
            raise
        row = {"path": printable(str(path)), "source_id": source_id, "ok": False, "error": str(exc), "version": None}
        return row | {"unreadable": isinstance(exc, UsageProblem)}
    ok = version["status"] != "failed"
    row = {"path": printable(str(path)), "source_id": source_id, "ok": ok, "error": version.get("error")}
    return row | {"version": version}


def ingest(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH...", help="Files to upload.")],
    source_id: Annotated[str | None, typer.Option(help="Every file becomes the next version of this source.")] = None,
    from_name: Annotated[
        bool, typer.Option("--source-id-from-name", help="Each file is its own source, named after the file.")
    ] = False,
    workspace_id: WorkspaceOption = None,
) -> None:
    """Upload files as versions of sources (one failure does not stop the rest; a progress bar for several)."""
    if (source_id is None) == (not from_name):
        raise UsageProblem("give exactly one of --source-id and --source-id-from-name")
    rows: list[dict[str, Any]] = []
    several = len(paths) > 1
    bar = Progress(
        TextColumn("ingest"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"), console=err()
    )
    with client() as api, bar if several else nullcontext():
        task = bar.add_task("", total=len(paths)) if several else None
        for path in paths:
            if task is not None:
                bar.update(task, description=printable(path.name))
            rows.append(_row(path, printable(path.name) if from_name else str(source_id), api, workspace_id))
            if task is not None:
                bar.advance(task)
    failures = sum(1 for r in rows if not r["ok"])
    if wants_json():
        print_json({"items": rows, "failed": failures})
    else:
        table(("FILE", "SOURCE", "VERSION", "STATUS", "COVERAGE"), [_cells(r) for r in rows])
    if failures:
        summary = f"{failures} of {len(paths)} files failed"
        unreadable = [r["path"] for r in rows if r.get("unreadable")]
        if unreadable:
            # A local file that cannot be read is the caller's mistake (exit 2), even when the rest went up.
            raise UsageProblem(f"{summary}; cannot read {', '.join(unreadable)}")
        raise CliError(summary)


def _cells(r: dict[str, Any]) -> tuple[Any, ...]:
    v = r["version"]
    if v is None:
        return (r["path"], r["source_id"], "-", "error", r["error"])
    status = v["status"] + (" (reused)" if v.get("reused") else "")
    return (r["path"], r["source_id"], v["version"], status, v.get("error") if v["status"] == "failed" else coverage(v))


def import_file(
    root: Annotated[str, typer.Argument(metavar="ROOT", help="An approved root's name (DOSSIER_APPROVED_ROOTS).")],
    path: Annotated[str, typer.Argument(metavar="PATH", help="A path inside that root.")],
    source_id: Annotated[str, typer.Option(help="The file becomes the next version of this source.")],
    workspace_id: WorkspaceOption = None,
) -> None:
    """Import a file from an approved root on the server's side."""
    body = {"root": root, "path": path, "source_id": source_id} | (
        {"workspace_id": workspace_id} if workspace_id else {}
    )
    with client() as api:
        emit(api.json("POST", "/v1/assets/import", json=body, timeout=INGEST_TIMEOUT), show_version)


@command(source, "show")
def source_show(source_id: Annotated[str, typer.Argument(metavar="SOURCE_ID")]) -> None:
    """A source's versions and which one is active."""
    with client() as api:
        emit(api.get(f"/v1/sources/{seg(source_id)}"), show_source)


@command(source, "retire")
def source_retire(source_id: Annotated[str, typer.Argument(metavar="SOURCE_ID")]) -> None:
    """Make every version of a source unavailable."""
    with client() as api:
        emit(api.json("POST", f"/v1/sources/{seg(source_id)}/retire"), show_source)


@command(asset, "show")
def asset_show(asset_id: Annotated[str, typer.Argument(metavar="ASSET_ID")]) -> None:
    """One asset version: identity, hash, state, extraction coverage."""
    with client() as api:
        emit(api.get(f"/v1/assets/{seg(asset_id)}"), show_version)


@command(evidence, "search")
def search(
    q: Annotated[str, typer.Argument(metavar="QUERY")],
    source_id: Annotated[str | None, typer.Option(help="Only this source.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=100, help="At most this many passages.")] = 10,
) -> None:
    """Full-text search over active versions: snippets with locators (a snippet is not a read)."""
    with client() as api:
        data = api.get("/v1/evidence/search", q=q, source_id=source_id, limit=limit)

    def human(d: dict[str, Any]) -> None:
        rows = [
            (i["evidence_id"], f"{i['source_id']}@{i['version']}", i["locator"], f"{i['score']:.3f}", i["snippet"])
            for i in d["items"]
        ]
        table(("EVIDENCE", "SOURCE", "LOCATOR", "SCORE", "SNIPPET"), rows)

    emit(data, human)


@command(evidence, "read")
def read(evidence_id: Annotated[str, typer.Argument(metavar="EVIDENCE_ID")]) -> None:
    """One passage, at its exact version and locator."""
    with client() as api:
        data = api.get(f"/v1/evidence/{seg(evidence_id)}")

    def human(d: dict[str, Any]) -> None:
        out().print(f"{d['source_id']}@{d['version']} {d['locator']} ({d['evidence_id']})")
        out().print(d["text"])

    emit(data, human)
