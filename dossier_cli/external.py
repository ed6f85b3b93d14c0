"""`dossier run catalog|search|read|write|renew|finish|take`: you drive a run started with `--external`.

The run and its lease come from `RUN` and `--lease`, else from DOSSIER_RUN and DOSSIER_RUN_LEASE (which
`dossier run start … --external --env` prints as `export` lines).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from dossier_cli.client import Client, UsageProblem, client, file_path, seg
from dossier_cli.commands import command, read_text
from dossier_cli.output import emit, err, out, record, ref, table
from dossier_cli.runs import run, show_run

RunArg = Annotated[
    str, typer.Argument(metavar="RUN", envvar="DOSSIER_RUN", help="The run (else DOSSIER_RUN).", show_default=False)
]
LeaseOpt = Annotated[
    str,
    typer.Option(
        "--lease", metavar="TOKEN", envvar="DOSSIER_RUN_LEASE", help="The lease token (else DOSSIER_RUN_LEASE)."
    ),
]


def register(app: typer.Typer) -> None:
    """The commands hang on `dossier run`, registered by dossier_cli.runs."""


def _call(api: Client, method: str, run_id: str, tail: str, lease: str, **kwargs: Any) -> Any:
    headers = {"X-Run-Lease": lease} | kwargs.pop("headers", {})
    return api.json(method, f"/v1/runs/{seg(run_id)}{tail}", headers=headers, **kwargs)


def parse_ref(value: str) -> dict[str, Any]:
    """`pub_…@2` (a publication version) or `evidence:ID` / an evidence id from `dossier run search`."""
    if value.startswith("evidence:"):
        return {"kind": "evidence", "id": value.removeprefix("evidence:")}
    head, _, version = value.rpartition("@")
    if head and version.lstrip("v").isdigit():
        return {"kind": "publication", "id": head, "version": int(version.lstrip("v"))}
    if value and "@" not in value:
        return {"kind": "evidence", "id": value}
    raise UsageProblem(f"REF is ID@VERSION for a publication or evidence:ID for a passage, not {value!r}")


@command(run, "catalog")
def catalog(
    run_id: RunArg,
    lease: Annotated[
        str | None,
        typer.Option(
            "--lease",
            metavar="TOKEN",
            envvar="DOSSIER_RUN_LEASE",
            help="The lease token of an external run (else DOSSIER_RUN_LEASE); a run Dossier drives needs none.",
        ),
    ] = None,
    cursor: Annotated[str | None, typer.Option(help="The next_cursor of the page before.")] = None,
) -> None:
    """A run's catalog as admitted, a page at a time (with a lease, a step of your external run: each item is
    recorded once as listed)."""
    with client() as api:
        params = {"cursor": cursor} if cursor else None
        if lease:
            data = _call(api, "GET", run_id, "/catalog", lease, params=params)
        else:
            data = api.json("GET", f"/v1/runs/{seg(run_id)}/catalog", params=params)

    def human(d: dict[str, Any]) -> None:
        table(
            ("KIND", "REF", "TITLE", "AVAILABLE"), [(i["kind"], ref(i), i["title"], i["available"]) for i in d["items"]]
        )
        if d.get("next_cursor"):
            out().print(f"{d['omitted']} more items: --cursor {d['next_cursor']}")

    emit(data, human)


@command(run, "search")
def search(
    query: Annotated[str, typer.Argument(metavar="QUERY")],
    run_id: Annotated[
        str, typer.Option("--run", metavar="RUN", envvar="DOSSIER_RUN", help="The run (else DOSSIER_RUN).")
    ],
    lease: LeaseOpt,
    limit: Annotated[int, typer.Option(min=1, max=50)] = 10,
) -> None:
    """Search the evidence and earlier publications your run may read; read a hit by its READ WITH."""
    with client() as api:
        data = _call(api, "GET", run_id, "/search", lease, params={"q": query, "limit": limit})

    def human(d: dict[str, Any]) -> None:
        rows = [
            (
                f"evidence:{h['evidence_id']}" if h["evidence_id"] else f"{h['ref']['id']}@{h['ref']['version']}",
                ref(h["ref"]),
                h["locator"] or "",
                h["snippet"],
            )
            for h in d["items"]
        ]
        table(("READ WITH", "FOUND", "LOCATOR", "SNIPPET"), rows)

    emit(data, human)


@command(run, "read")
def read(
    material: Annotated[str, typer.Argument(metavar="REF", help="ID@VERSION (a publication) or evidence:ID.")],
    run_id: Annotated[
        str, typer.Option("--run", metavar="RUN", envvar="DOSSIER_RUN", help="The run (else DOSSIER_RUN).")
    ],
    lease: LeaseOpt,
) -> None:
    """Read material for your run at its exact version; it is kept in the run's sources/."""
    with client() as api:
        data = _call(api, "POST", run_id, "/read", lease, json={"ref": parse_ref(material)})

    def human(d: dict[str, Any]) -> None:
        err().print(f"{ref(d['ref'])} {d.get('locator') or ''} → {d['path']}")
        sys.stdout.write(d["text"] if d["text"].endswith("\n") else d["text"] + "\n")

    emit(data, human)


@command(run, "write")
def write(
    path: Annotated[str, typer.Argument(metavar="PATH", help="plan.md, draft.md or notes/<name>.md")],
    source: Annotated[Path, typer.Option("--from", metavar="FILE", help="The text ('-' for stdin).")],
    run_id: Annotated[
        str, typer.Option("--run", metavar="RUN", envvar="DOSSIER_RUN", help="The run (else DOSSIER_RUN).")
    ],
    lease: LeaseOpt,
) -> None:
    """Write one of your run's working files."""
    text = read_text(source)
    with client() as api:
        headers = {"content-type": "text/plain; charset=utf-8"}
        tail = "/files/" + file_path(path)
        _call(api, "PUT", run_id, tail, lease, content=text.encode(), headers=headers)
    emit({"run_id": run_id, "path": path, "size": len(text.encode())}, lambda _: err().print(f"{path} written"))


@command(run, "renew")
def renew(run_id: RunArg, lease: LeaseOpt) -> None:
    """Renew your run's lease: the same token, a later expiry."""
    with client() as api:
        emit(_call(api, "POST", run_id, "/lease", lease), lambda d: record({k: d[k] for k in ("epoch", "expires_at")}))


@command(run, "finish")
def finish(
    answer_file: Annotated[Path, typer.Option("--answer-file", metavar="FILE", help="The answer ('-' for stdin).")],
    run_id: Annotated[
        str, typer.Option("--run", metavar="RUN", envvar="DOSSIER_RUN", help="The run (else DOSSIER_RUN).")
    ],
    lease: LeaseOpt,
    title: Annotated[str | None, typer.Option(help="The publication's title.")] = None,
) -> None:
    """Publish your run's answer; it may cite only what the run read, at that version."""
    body: dict[str, Any] = {"answer": read_text(answer_file)}
    if title:
        body["title"] = title
    with client() as api:
        emit(_call(api, "POST", run_id, "/finish", lease, json=body, timeout=90), show_run)


@command(run, "take")
def take(
    run_id: RunArg,
    force: Annotated[bool, typer.Option("--force", help="Take it even while its lease is held.")] = False,
    env: Annotated[bool, typer.Option("--env", help="Print `export` lines of the run and the new lease.")] = False,
) -> None:
    """Resume an external run as a new session: a new lease, and what it already read."""
    with client() as api:
        data = api.json("POST", f"/v1/runs/{seg(run_id)}/lease/take", json={"force": force})

    def human(d: dict[str, Any]) -> None:
        lease = d["lease"]
        if env:
            sys.stdout.write(f"export DOSSIER_RUN={run_id}\nexport DOSSIER_RUN_LEASE={lease['token']}\n")
            return
        out().print(f"lease epoch {lease['epoch']} until {lease['expires_at']}; token (shown once): {lease['token']}")
        table(
            ("READ", "LOCATOR", "PATH"),
            [(ref(r["ref"]), r.get("locator") or "", r["path"]) for r in d["resume"]["reads"]],
        )

    emit(data, human)
