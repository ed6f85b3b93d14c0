"""`dossier ingest PATH...`, `dossier source show|retire`, `dossier evidence search|read`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from dossier_cli.client import Client, CliError, print_json

# An upload's reply waits for extraction; a large file may take a while on a busy machine.
INGEST_TIMEOUT = 600.0


def register(sub: argparse._SubParsersAction) -> None:
    ingest = sub.add_parser("ingest", help="upload files as versions of sources (one failure does not stop the rest)")
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    naming = ingest.add_mutually_exclusive_group(required=True)
    naming.add_argument("--source-id", help="every file becomes the next version of this source")
    naming.add_argument(
        "--source-id-from-name", action="store_true", help="each file is its own source, named after the file"
    )
    ingest.add_argument("--workspace", dest="workspace_id", help="associate the sources with this workspace")
    ingest.set_defaults(func=_ingest)

    source = sub.add_parser("source", help="a source and its versions")
    actions = source.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="the versions of a source")
    show.add_argument("source_id")
    show.set_defaults(
        func=lambda client, args: _print(client.request("GET", f"/v1/sources/{quote(args.source_id, safe='')}"))
    )
    retire = actions.add_parser("retire", help="make every version of a source unavailable")
    retire.add_argument("source_id")
    retire.set_defaults(
        func=lambda client, args: _print(client.request("POST", f"/v1/sources/{quote(args.source_id, safe='')}/retire"))
    )

    evidence = sub.add_parser("evidence", help="search passages of active versions, or read one")
    ev_actions = evidence.add_subparsers(dest="action", required=True)
    search = ev_actions.add_parser("search")
    search.add_argument("q")
    search.add_argument("--source-id")
    search.add_argument("--limit", type=int, default=10)
    search.set_defaults(func=_search)
    read = ev_actions.add_parser("read")
    read.add_argument("evidence_id")
    read.set_defaults(
        func=lambda client, args: _print(client.request("GET", f"/v1/evidence/{quote(args.evidence_id, safe='')}"))
    )


def _print(value: Any) -> int:
    print_json(value)
    return 0


def _search(client: Client, args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"q": args.q, "limit": args.limit}
    if args.source_id:
        params["source_id"] = args.source_id
    return _print(client.request("GET", "/v1/evidence/search", params=params))


def _progress(done: int, total: int, name: str) -> None:
    width = 24
    filled = width * done // total
    bar = "#" * filled + "-" * (width - filled)
    sys.stderr.write(f"\r[{bar}] {done}/{total} {name[:40]:<40}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _coverage(version: dict[str, Any]) -> str:
    extraction = version.get("extraction") or {}
    if not extraction:
        return "-"
    return f"{extraction['status']} {extraction['units_extracted']}/{extraction['units_total']}"


def _upload(client: Client, path: Path, source_id: str, workspace_id: str | None) -> dict[str, Any]:
    fields = {"source_id": source_id}
    if workspace_id:
        fields["workspace_id"] = workspace_id
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from exc
    with handle:
        result: dict[str, Any] = client.request(
            "POST", "/v1/assets", data=fields, files={"file": (path.name, handle)}, timeout=INGEST_TIMEOUT
        )
    return result


def _ingest(client: Client, args: argparse.Namespace) -> int:
    paths: list[Path] = args.paths
    rows: list[tuple[str, ...]] = []
    failures = 0
    show_progress = len(paths) > 1
    for number, path in enumerate(paths, start=1):
        if show_progress:
            _progress(number - 1, len(paths), path.name)
        source_id = path.name if args.source_id_from_name else args.source_id
        try:
            version = _upload(client, path, source_id, args.workspace_id)
        except CliError as exc:
            failures += 1
            rows.append((str(path), source_id, "-", "error", str(exc)))
        else:
            status = version["status"] + (" (reused)" if version.get("reused") else "")
            if version["status"] == "failed":
                failures += 1
                detail = version.get("error") or ""
            else:
                detail = _coverage(version)
            rows.append((str(path), source_id, str(version["version"]), status, detail))
        if show_progress:
            _progress(number, len(paths), path.name)
    _table(("FILE", "SOURCE", "VERSION", "STATUS", "COVERAGE"), rows)
    if failures:
        print(f"dossier: {failures} of {len(paths)} files failed", file=sys.stderr)
    return 1 if failures else 0


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
