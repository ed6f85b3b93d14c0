"""`dossier logs`: the local stack's logs for a person, read from `$DOSSIER_HOME/logs/` (no gateway needed)."""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

from dossier_cli.client import UsageProblem, wants_json
from dossier_cli.commands import command
from dossier_cli.logread import Entry, Tail, history, kind_of, kinds

POLL_SECONDS = 0.2
PROCESS_WIDTH = 12


def register(app: typer.Typer) -> None:
    command(app, "logs")(logs)


def log_folder(home: Path | None) -> Path:
    home = home or Path(os.environ.get("DOSSIER_HOME") or ".dossier")
    folder = home / "logs"
    if not folder.is_dir():
        raise UsageProblem(f"no logs in {folder}: run where the stack's home is, or pass --home or DOSSIER_HOME")
    return folder


def selection(folder: Path, processes: list[str]) -> dict[str, set[str] | None]:
    """kind → the process names wanted in its file (None: all of them)."""
    present = kinds(folder)
    if not processes:
        return dict.fromkeys(present)
    chosen: dict[str, set[str] | None] = {}
    for process in processes:
        kind = kind_of(process)
        shared = kind is not None and kind != process and kind in present
        if process not in present and not shared:
            raise UsageProblem(f"no log of {process!r} in {folder}; there are: {', '.join(present) or 'none'}")
        if process in present:
            # A kind, a server's node (`nats.2`), or a process's own file from an earlier release.
            chosen[process] = None
        if shared:
            names = chosen.setdefault(str(kind), set())
            if names is not None:
                names.add(process)
    return chosen


def readable(entry: Entry) -> str:
    """`time process level request-id message`, the time in UTC; a traceback follows, indented."""
    when = entry.key[:23].replace("T", " ") if entry.key else " " * 23
    if entry.data is None:
        return f"{when}  {entry.process:<{PROCESS_WIDTH}} {'-':<7} -  {entry.text}"
    data = entry.data
    level = str(data.get("level") or "-")
    request_id = data.get("request_id") or "-"
    line = f"{when}  {entry.process:<{PROCESS_WIDTH}} {level:<7} {request_id}  {data.get('msg', '')}"
    error = data.get("error")
    if error:
        line += "".join(f"\n    {part}" for part in str(error).rstrip("\n").split("\n"))
    return line


def as_json(entry: Entry) -> str:
    """The line as written; a server's plain line as a JSON object, so that every line is JSON."""
    if entry.data is not None:
        return entry.text
    return json.dumps({"ts": entry.key or None, "process": entry.kind, "msg": entry.text}, ensure_ascii=False)


def logs(
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Go on printing lines as they are written (Ctrl-C stops).")
    ] = False,
    request_id: Annotated[
        str | None, typer.Option("--request-id", metavar="ID", help="Only the lines of this request id.")
    ] = None,
    process: Annotated[
        list[str] | None,
        typer.Option(
            "--process",
            "-p",
            metavar="P",
            help="Only this process kind (gateway, workspace, nats, …) or process (gateway-w2, workspace.2); "
            "repeatable.",
        ),
    ] = None,
    last: Annotated[
        int | None, typer.Option("--tail", min=0, metavar="N", help="Only the last N lines written so far.")
    ] = None,
    home: Annotated[
        Path | None, typer.Option("--home", metavar="DIR", help="The stack's home (over DOSSIER_HOME; ./.dossier).")
    ] = None,
) -> None:
    """The local stack's logs in time order: every process's file and its rotated backups, merged.

    Each line prints as `time process level request-id message` (time in UTC); --json prints the lines as
    written (JSON), a server's plain line wrapped as {"ts", "process", "msg"}."""
    folder = log_folder(home)
    chosen = selection(folder, process or [])
    render = as_json if wants_json() else readable

    def wanted(entry: Entry) -> bool:
        names = chosen.get(entry.kind)
        if names is not None and entry.process not in names:
            return False
        return request_id is None or (entry.data is not None and entry.data.get("request_id") == request_id)

    def write(entries: Iterable[Entry]) -> None:
        sys.stdout.writelines(render(entry) + "\n" for entry in entries)
        sys.stdout.flush()

    tails = {kind: Tail(folder, kind) for kind in chosen}
    try:
        past = (entry for entry in history(folder, tails.values()) if wanted(entry))
        write(collections.deque(past, maxlen=last) if last is not None else past)
        while follow:
            time.sleep(POLL_SECONDS)
            if not process:
                # A kind whose first line came after the start (a process's first restart line, say).
                for kind in kinds(folder):
                    if kind not in tails:
                        chosen[kind] = None
                        tails[kind] = Tail(folder, kind)
            fresh = [entry for tail in tails.values() for entry in tail.new() if wanted(entry)]
            write(sorted(fresh, key=lambda entry: entry.key))
    finally:
        for tail in tails.values():
            tail.close()
