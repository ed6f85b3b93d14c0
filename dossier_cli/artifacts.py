"""`dossier artifact upload|show|download`: retained files such as HTML reports."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from dossier_cli.client import UsageProblem, client, seg, wants_json
from dossier_cli.commands import command
from dossier_cli.output import emit, err, record

artifact = typer.Typer(help="Artifacts: retained files (HTML reports), served sandboxed.", no_args_is_help=True)

ArtifactId = Annotated[str, typer.Argument(metavar="ARTIFACT", help="An artifact id.")]
UPLOAD_TIMEOUT = 600.0


def register(app: typer.Typer) -> None:
    app.add_typer(artifact, name="artifact")


@command(artifact, "upload")
def upload(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="An HTML file.")],
    title: Annotated[str, typer.Option(help="The artifact's title.")],
) -> None:
    """Retain an HTML file."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UsageProblem(f"cannot read {path}: {exc.strerror}") from exc
    with handle, client() as api:
        files = {"file": (path.name, handle, "text/html")}
        emit(api.json("POST", "/v1/artifacts", data={"title": title}, files=files, timeout=UPLOAD_TIMEOUT), record)


@command(artifact, "show")
def show(artifact_id: ArtifactId) -> None:
    """An artifact's title, media type, size and hash."""
    with client() as api:
        emit(api.get(f"/v1/artifacts/{seg(artifact_id)}"), record)


@command(artifact, "download")
def download(
    artifact_id: ArtifactId,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", metavar="FILE", help="Write here (default: stdout).")
    ] = None,
) -> None:
    """The artifact's bytes, checked against their hash by the gateway."""
    if output is None and wants_json():
        raise UsageProblem("with --json, name the file to write with --output")
    with client() as api:
        content = api.send("GET", f"/v1/artifacts/{seg(artifact_id)}/content", timeout=UPLOAD_TIMEOUT).content
    if output is None:
        sys.stdout.buffer.write(content)
        sys.stdout.flush()
        return
    try:
        output.write_bytes(content)
    except OSError as exc:
        raise UsageProblem(f"cannot write {output}: {exc.strerror}") from exc
    result: dict[str, Any] = {"id": artifact_id, "path": str(output), "size": len(content)}
    emit(result, lambda r: err().print(f"wrote {r['size']} bytes to {r['path']}"))
