"""`dossier run ...`, `dossier ledger RUN` and `dossier conversation show`: start, follow and inspect runs."""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from dossier_cli.client import EXIT_UNREACHABLE, Client, CliError, UsageProblem, client, file_path, seg, wants_json
from dossier_cli.commands import command, default_group, read_text
from dossier_cli.output import cell, emit, err, out, print_json, record, ref, table

FINAL = ("completed", "failed", "cancelled")
POLL_SECONDS = 1.0
# Polls in a row that may fail while a service restarts (the supervisor restarts one within seconds).
PATIENCE = 60

run = typer.Typer(
    cls=default_group("start"),
    help='Research runs. `dossier run WS "question"` is `dossier run start WS "question"`.',
    no_args_is_help=True,
)
conversation = typer.Typer(help="Conversations: runs that continue one another.", no_args_is_help=True)

RunId = Annotated[str, typer.Argument(metavar="RUN", help="A run id (run_...).")]


def register(app: typer.Typer) -> None:
    app.add_typer(run, name="run")
    app.add_typer(conversation, name="conversation")
    command(app, "ledger")(ledger)


def _path(run_id: str, tail: str = "") -> str:
    return f"/v1/runs/{seg(run_id)}{tail}"


def _history(values: list[str]) -> list[dict[str, Any]]:
    refs = []
    for value in values:
        pub_id, _, version = value.rpartition("@")
        if not pub_id or not version.isdigit():
            raise UsageProblem(f"--history takes ID@VERSION, not {value!r}")
        refs.append({"publication_id": pub_id, "version": int(version)})
    return refs


def show_run(r: dict[str, Any]) -> None:
    stats = r.get("stats") or {}
    proposal = r.get("checkpoint_proposal") or {}
    record(
        {
            "id": r["id"],
            "status": r["status"],
            "workspace": r["workspace_id"],
            "conversation": r["conversation_id"],
            "question": r["question"],
            "model": r.get("model"),
            "goal_version": r.get("goal_version"),
            "history": ", ".join(ref(h) for h in r.get("history") or []) or "-",
            "catalog": f"{len(r['catalog']['items'])} items, complete: {cell(r['catalog']['complete'])}",
            "publication": ref(r["publication"]) if r.get("publication") else "-",
            "checkpoint": f"{proposal.get('status', '-')} (revision {proposal.get('revision') or '-'})",
            "association": r.get("workspace_association"),
            "error": r.get("error"),
            "created_at": r.get("created_at"),
            "finished_at": r.get("finished_at"),
            **({"stats": stats} if stats else {}),
        }
    )


@command(run, "start")
def start(
    workspace_id: Annotated[str, typer.Argument(metavar="WORKSPACE")],
    question: Annotated[str, typer.Argument(metavar="QUESTION")],
    history: Annotated[
        list[str] | None, typer.Option(metavar="ID@V", help="An earlier publication version to read (repeatable).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="extractive (default), openai, ...")] = None,
    request_id: Annotated[
        str | None, typer.Option(help="Makes a retried command start no second run (default: a new id).")
    ] = None,
    conversation_id: Annotated[str | None, typer.Option("--conversation", help="Continue this conversation.")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Follow the run, then print its answer and ledger.")] = False,
    external: Annotated[
        bool, typer.Option("--external", help="You drive the run (dossier run search|read|write|finish).")
    ] = False,
    lease_seconds: Annotated[
        int | None, typer.Option(metavar="SECONDS", help="An external run's lease (30-3600, default 300).")
    ] = None,
    env: Annotated[
        bool, typer.Option("--env", help="With --external: print `export DOSSIER_RUN=… DOSSIER_RUN_LEASE=…` lines.")
    ] = False,
) -> None:
    """Start a research run in a workspace."""
    body: dict[str, Any] = {
        "question": question,
        "request_id": request_id or f"cli-{uuid.uuid4().hex}",
        "history": _history(history or []),
    }
    if model:
        body["model"] = model
    if conversation_id:
        body["conversation_id"] = conversation_id
    if external:
        if wait:
            raise UsageProblem("--wait follows a run the run host drives; an external run is driven by you")
        body["driver"] = "external"
        if lease_seconds is not None:
            body["lease_seconds"] = lease_seconds
    elif env or lease_seconds is not None:
        raise UsageProblem("--env and --lease-seconds are for --external runs")
    with client() as api:
        started = api.json("POST", f"/v1/workspaces/{seg(workspace_id)}/runs", json=body)
        if external:
            emit(started, _exports if env else _begun)
            return
        if not wait:
            emit(started, _started)
            return
        if not wants_json():
            _started(started)
        finished = _follow(api, started["id"])
        if wants_json():
            print_json(finished)
        else:
            _answer(api, finished)
    if finished["status"] != "completed":
        limit = (finished.get("error_details") or {}).get("limit")
        why = f"{finished.get('error') or 'no answer'}{f' ({limit})' if limit else ''}"
        raise CliError(f"run {finished['id']} {finished['status']}: {why}")


def _begun(r: dict[str, Any]) -> None:
    lease = r.get("lease") or {}
    out().print(
        f"run {r['id']} ({r['status']}), driven by you; lease epoch {lease.get('epoch')} until {lease.get('expires_at')}"
    )
    out().print(f"lease token (shown once): {lease.get('token')}")


def _exports(r: dict[str, Any]) -> None:
    lease = r.get("lease") or {}
    sys.stdout.write(f"export DOSSIER_RUN={r['id']}\nexport DOSSIER_RUN_LEASE={lease.get('token')}\n")


def _started(r: dict[str, Any]) -> None:
    out().print(f"run {r['id']} ({r['status']}), goal v{r['goal_version']}, catalog {len(r['catalog']['items'])} items")


def _progress_line(api: Client, r: dict[str, Any]) -> str:
    files = api.collect(_path(r["id"], "/files"))["items"]
    notes = sum(1 for f in files if f["path"].startswith("notes/"))
    sources = sum(1 for f in files if f["path"].startswith("sources/"))
    return f"{r['status']}: {sources} sources read, {notes} notes"


def _poll(api: Client, run_id: str) -> tuple[dict[str, Any], str]:
    """The run and a progress line; a gateway or runhost that is restarting is waited out, up to a bound."""
    failures = 0
    while True:
        try:
            r = dict(api.get(_path(run_id)))
            return r, _progress_line(api, r)
        except CliError as exc:
            code = (exc.envelope or {}).get("error", {}).get("code")
            failures += 1
            if failures > PATIENCE or not (exc.exit_code == EXIT_UNREACHABLE or code in ("timeout", "internal")):
                raise
            time.sleep(POLL_SECONDS)


def _follow(api: Client, run_id: str) -> dict[str, Any]:
    """Poll until the run is final: a Rich status on a terminal, one line per change otherwise."""
    console = err()
    if console.is_terminal:
        with console.status(f"run {run_id}: waiting") as status:
            while (polled := _poll(api, run_id))[0]["status"] not in FINAL:
                status.update(f"run {run_id}: {polled[1]}")
                time.sleep(POLL_SECONDS)
        return polled[0]
    last = ""
    while True:
        r, line = _poll(api, run_id)
        if line != last:
            console.print(line)
            last = line
        if r["status"] in FINAL:
            return r
        time.sleep(POLL_SECONDS)


def _answer(api: Client, r: dict[str, Any]) -> None:
    if r["status"] != "completed" or not r.get("publication"):
        return
    pub = r["publication"]
    body = api.get(f"/v1/publications/{seg(pub['id'])}/versions/{seg(pub['version'])}")["body"]
    console = out()
    console.print(body)
    console.print(summary(api.collect(_path(r["id"], "/ledger"))["items"]))
    proposal = r["checkpoint_proposal"]["status"]
    console.print(
        f"publication {pub['id']}@{pub['version']}, workspace association: {r['workspace_association']},"
        f" checkpoint: {proposal}"
    )


def summary(items: list[dict[str, Any]]) -> str:
    stages = Counter(i["stage"] for i in items)
    consumed = {ref(i["ref"]) for i in items if i["stage"] == "included"}
    return (
        f"ledger: {stages['listed']} listed, {stages['read']} read, {stages['included']} included"
        f" ({len(consumed)} distinct sources consumed), {stages['unavailable']} unavailable"
    )


def _ledger(data: dict[str, Any]) -> None:
    rows = [
        (i["seq"], i["stage"], ref(i["ref"]), i.get("locator") or i.get("reason") or "", i.get("model_request") or "")
        for i in data["items"]
    ]
    table(("SEQ", "STAGE", "REF", "LOCATOR/REASON", "MODEL REQUEST"), rows)
    out().print(summary(data["items"]))


def ledger(run_id: RunId) -> None:
    """What a run listed, read, included and found unavailable."""
    with client() as api:
        emit(api.collect(_path(run_id, "/ledger")), _ledger)


command(run, "ledger")(ledger)


@command(run, "show")
def show(run_id: RunId) -> None:
    """One run: status, snapshot, publication, checkpoint proposal, stats."""
    with client() as api:
        emit(api.get(_path(run_id)), show_run)


@command(run, "cancel")
def cancel(run_id: RunId) -> None:
    """Cancel a run that has not finished."""
    with client() as api:
        emit(api.json("POST", _path(run_id, "/cancel")), show_run)


@command(run, "prov")
def prov(run_id: RunId) -> None:
    """The run's lineage as W3C PROV-JSON (always printed as JSON)."""
    with client() as api:
        print_json(api.get(_path(run_id, "/prov")))


@command(run, "files")
def files(run_id: RunId) -> None:
    """The run's working memory: plan.md, sources/, notes/, draft.md."""
    with client() as api:
        data = api.collect(_path(run_id, "/files"))
    emit(data, lambda d: table(("PATH", "SIZE"), [(f["path"], f["size"]) for f in d["items"]]))


def _file(api: Client, run_id: str, path: str) -> None:
    text = api.text(_path(run_id, "/files/" + file_path(path)))
    if wants_json():
        print_json({"run_id": run_id, "path": path, "text": text})
    else:
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


@command(run, "file")
def file(run_id: RunId, path: Annotated[str, typer.Argument(help="A path from `dossier run files`.")]) -> None:
    """One file of the run, as text."""
    with client() as api:
        _file(api, run_id, path)


@command(run, "plan")
def plan(
    run_id: RunId,
    source: Annotated[
        Path | None, typer.Option("--from", metavar="FILE", help="Replace plan.md with this file ('-' for stdin).")
    ] = None,
) -> None:
    """Print plan.md, or replace it (the run's next step recites the edit)."""
    with client() as api:
        if source is None:
            _file(api, run_id, "plan.md")
            return
        text = read_text(source)
        headers = {"content-type": "text/plain; charset=utf-8"}
        api.send("PUT", _path(run_id, "/files/plan.md"), content=text.encode(), headers=headers)
    emit({"run_id": run_id, "path": "plan.md", "size": len(text.encode())}, lambda _: err().print("plan.md replaced"))


@command(conversation, "show")
def conversation_show(conversation_id: Annotated[str, typer.Argument(metavar="CONVERSATION")]) -> None:
    """A conversation and its runs."""
    with client() as api:
        data = api.get(f"/v1/conversations/{seg(conversation_id)}")

    def human(d: dict[str, Any]) -> None:
        out().print(f"conversation {d['id']} in workspace {d['workspace_id']}")
        table(
            ("RUN", "STATUS", "CREATED", "QUESTION"),
            [(r["id"], r["status"], r["created_at"], r["question"]) for r in d["runs"]],
        )

    emit(data, human)
