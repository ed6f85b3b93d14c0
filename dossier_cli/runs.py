"""`dossier run WORKSPACE "question" [--history ID@V] [--wait]` and `dossier ledger RUN`."""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections import Counter
from typing import Any

from dossier_cli.client import Client, CliError

FINAL = ("completed", "failed", "cancelled")


def register(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="start a research run in a workspace")
    run.add_argument("workspace")
    run.add_argument("question")
    run.add_argument(
        "--history", action="append", default=[], metavar="ID@V", help="an earlier publication version to read"
    )
    run.add_argument("--model", help="extractive (default), openai, ...")
    run.add_argument("--request-id", help="makes a retried command start no second run (default: a new id)")
    run.add_argument("--conversation", help="continue this conversation")
    run.add_argument("--wait", action="store_true", help="show progress, then the answer and the ledger summary")
    run.set_defaults(func=_run)

    ledger = sub.add_parser("ledger", help="what a run listed, read, included and found unavailable")
    ledger.add_argument("run_id")
    ledger.set_defaults(func=_ledger)


def _history(values: list[str]) -> list[dict[str, Any]]:
    refs = []
    for value in values:
        pub_id, _, version = value.rpartition("@")
        if not pub_id or not version.isdigit():
            raise CliError(f"--history takes ID@VERSION, not {value!r}")
        refs.append({"publication_id": pub_id, "version": int(version)})
    return refs


def _run(client: Client, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "question": args.question,
        "request_id": args.request_id or f"cli-{uuid.uuid4().hex}",
        "history": _history(args.history),
    }
    if args.model:
        body["model"] = args.model
    if args.conversation:
        body["conversation_id"] = args.conversation
    run = client.request("POST", f"/v1/workspaces/{args.workspace}/runs", json=body)
    print(
        f"run {run['id']} ({run['status']}), goal v{run['goal_version']}, catalog {len(run['catalog']['items'])} items"
    )
    if not args.wait:
        return 0
    run = _wait(client, run["id"])
    if run["status"] != "completed":
        raise CliError(f"run {run['id']} {run['status']}: {run.get('error') or 'no answer'}")
    answer = client.request(
        "GET", f"/v1/publications/{run['publication']['id']}/versions/{run['publication']['version']}"
    )
    print(answer["body"])
    print(_summary(client.request("GET", f"/v1/runs/{run['id']}/ledger")["items"]))
    print(
        f"publication {run['publication']['id']}@{run['publication']['version']}, workspace association: {run['workspace_association']}, checkpoint: {run['checkpoint_proposal']['status']}"
    )
    return 0


def _wait(client: Client, run_id: str) -> dict[str, Any]:
    interactive = sys.stderr.isatty()
    while True:
        run = client.request("GET", f"/v1/runs/{run_id}")
        files = client.request("GET", f"/v1/runs/{run_id}/files")["items"]
        notes = sum(1 for f in files if f["path"].startswith("notes/"))
        sources = sum(1 for f in files if f["path"].startswith("sources/"))
        line = f"{run['status']}: {sources} sources read, {notes} notes"
        print(
            ("\r" + line.ljust(60)) if interactive else line,
            end="" if interactive else "\n",
            file=sys.stderr,
            flush=True,
        )
        if run["status"] in FINAL:
            if interactive:
                print(file=sys.stderr)
            return dict(run)
        time.sleep(1.0)


def _summary(items: list[dict[str, Any]]) -> str:
    stages = Counter(i["stage"] for i in items)
    consumed = {(i["ref"]["kind"], i["ref"]["id"], i["ref"]["version"]) for i in items if i["stage"] == "included"}
    return (
        f"ledger: {stages['listed']} listed, {stages['read']} read, {stages['included']} included"
        f" ({len(consumed)} distinct sources consumed), {stages['unavailable']} unavailable"
    )


def _ledger(client: Client, args: argparse.Namespace) -> int:
    items = client.request("GET", f"/v1/runs/{args.run_id}/ledger")["items"]
    for i in items:
        ref = f"{i['ref']['kind']}:{i['ref']['id']}@{i['ref']['version']}"
        extra = i["locator"] or i["reason"] or ""
        print(f"{i['seq']:>5}  {i['stage']:<11} {ref:<60} {extra:<24} {i['model_request'] or ''}")
    print(_summary(items))
    return 0
