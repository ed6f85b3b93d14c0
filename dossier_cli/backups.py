"""`dossier admin backup|restore` (a local stack's home) and `dossier admin writes hold|release` (the API).

Backup and restore read and write a `$DOSSIER_HOME` (its database superuser's password, its object files),
so they run where the home is, with the local stack's tools (devstack/backup.py, devstack/restore.py); a
compose deployment has deploy/compose-backup.sh and deploy/compose-restore.sh, and for Kubernetes
docs/operations.md gives the commands against its engines.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer

from dossier_cli.client import Client, CliError, UsageProblem, client, option
from dossier_cli.commands import command
from dossier_cli.output import emit, err, out

HOLD_PATH = "/v1/admin/writes/hold"
writes = typer.Typer(
    help="Hold writes at every gateway process, or let them go on (admin token).", no_args_is_help=True
)

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", metavar="DIR", help="The running stack's home (over DOSSIER_HOME; default ./.dossier)."),
]


def register(admin: typer.Typer) -> None:
    admin.add_typer(writes, name="writes")
    command(admin, "backup")(backup)
    command(admin, "restore")(restore)


def _held(state: dict[str, Any]) -> None:
    if state["held"]:
        err().print(f"writes held for {state['seconds_left']:.0f} s at {state['processes']} gateway processes")
    else:
        err().print("writes go on")


@command(writes, "hold")
def hold(
    seconds: Annotated[int, typer.Option(min=1, max=300, help="Release by itself after this long.")] = 60,
) -> None:
    """Make every write wait at every gateway process (reads go on) until released or SECONDS are up."""
    with client(admin=True) as api:
        emit(api.json("POST", HOLD_PATH, json={"seconds": seconds}), _held)


@command(writes, "release")
def release() -> None:
    """End a hold: the writes that wait go on at once."""
    with client(admin=True) as api:
        emit(api.json("DELETE", HOLD_PATH), _held)


def _local_tools(name: str) -> ModuleType:
    import importlib

    try:
        return importlib.import_module(f"devstack.{name}")
    except ImportError as exc:
        raise UsageProblem(
            f"this installation has no local stack tools (devstack: {exc}); a compose deployment is backed "
            "up with deploy/compose-backup.sh, a Kubernetes one with its engines' commands (docs/operations.md, "
            "Backup and restore)"
        ) from None


def _home(given: Path | None) -> Path:
    return given or Path(os.environ.get("DOSSIER_HOME") or ".dossier")


def _admin_token(home: Path) -> str:
    token = option("token") or os.environ.get("DOSSIER_ADMIN_TOKEN")
    if token:
        return str(token)
    try:
        return (home / "admin-token").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageProblem(f"no admin token: pass --token, set DOSSIER_ADMIN_TOKEN, or make {home} readable") from exc


@contextmanager
def _writes_held(api: Client, seconds: int) -> Iterator[None]:
    state = api.json("POST", HOLD_PATH, json={"seconds": seconds})
    err().print(f"writes held at {state['processes']} gateway processes")
    try:
        yield
    finally:
        try:
            api.json("DELETE", HOLD_PATH)
        except CliError as exc:
            err().print(f"dossier: the writes were not released ({exc}); they go on by themselves within {seconds} s")


def backup(
    out_file: Annotated[Path, typer.Option("--out", metavar="FILE", help="The archive to write (a .tar.gz).")],
    home: HomeOption = None,
) -> None:
    """Copy the running stack into one archive at one point in time across its services.

    Every service's database (one copy of the whole cluster), the object bytes, and the keys and secrets the
    data needs. Writes wait at the gateway while the databases are copied (seconds); reads go on. Run it where
    the stack's home is: it reads the home's credentials. The gateway is the home's (stack.json) unless --url
    says otherwise.
    """
    tools = _local_tools("backup")
    home = _home(home)
    try:
        state = tools.running_state(home.resolve())
        url = option("url") or state["gateway_url"]
        with Client(str(url), _admin_token(home)) as api:
            summary = tools.make_backup(home, out_file, lambda: _writes_held(api, tools.HOLD_SECONDS))
    except tools.BackupProblem as exc:
        raise (UsageProblem if exc.usage else CliError)(str(exc)) from None

    def human(s: dict[str, Any]) -> None:
        mib = s["archive_bytes"] / 2**20
        out().print(
            f"{s['archive']}: {len(s['postgres']['databases'])} databases, {s['objects']['count']} objects, "
            f"{mib:.1f} MiB; writes held {s['writes_held_seconds']:.2f} s"
        )

    emit(summary, human)


def restore(
    archive: Annotated[Path, typer.Argument(metavar="FILE", help="An archive of `dossier admin backup`.")],
    home: Annotated[Path, typer.Option("--home", metavar="DIR", help="An empty (or new) folder for the home.")],
) -> None:
    """Fill an empty home from a backup; `make up` with DOSSIER_HOME=DIR then serves the same data.

    The archive is checked against its manifest before anything of it is used: a corrupt archive, or a home
    that is not empty, is refused (exit 2) and the home is left as it was. Events that no consumer had applied
    at the backup are published again when the stack starts.
    """
    tools = _local_tools("restore")
    archive_mod = _local_tools("archive")
    try:
        summary = tools.restore(archive, home)
    except tools.RestoreProblem as exc:
        raise UsageProblem(str(exc)) from None
    except archive_mod.Corrupt as exc:
        raise UsageProblem(f"{archive} is not a usable backup: {exc}") from None

    def human(s: dict[str, Any]) -> None:
        again = sum(s["events_to_publish_again"].values())
        out().print(
            f"{s['home']}: restored the backup of {s['created_at']} (dossier {s['dossier_version']}), "
            f"{s['objects']['count']} objects, {again} events to publish again; "
            f"start it with DOSSIER_HOME={s['home']} make up"
        )

    emit(summary, human)
