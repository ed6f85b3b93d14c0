"""`dossier admin restore FILE --home DIR`: a backup (devstack/backup.py) made into a new home for `make up`.

The home must be empty or not exist yet: a restore never mixes an archive with what a home holds. The archive
is extracted into a folder inside the home and checked against its manifest before anything of it is put
in place; a corrupt or foreign archive leaves the home as it was. Then the restored cluster is started once,
on a free port, to mark for publishing again the events no consumer had applied (shared.redelivery): the
restored stack starts with an empty event stream. What `make up` makes at every start (the NATS and S3
configs, the outside subscribers' `events.json`, the ports) is made then, on this machine's free ports.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Any

import asyncpg

from devstack.archive import unpack
from devstack.backup import PARTS, postgres_version
from devstack.infra import PG_SUPERUSER, postgres_child, postgres_dsn
from devstack.procs import free_port, port_open
from shared.children import wait_until
from shared.contracts.common import ALL_PROCESSES
from shared.redelivery import redeliver
from shared.secretfiles import private_folder

STAGING = ".restoring"
START_SECONDS = 60.0


class RestoreProblem(Exception):
    """Why nothing was restored (the home is left as it was)."""


def restore(archive: Path, home: Path) -> dict[str, Any]:
    """Fill the empty (or new) `home` from `archive`; the manifest's summary and what was marked again."""
    home = home.resolve()
    if not archive.is_file():
        raise RestoreProblem(f"{archive}: no such file")
    if home.exists() and (not home.is_dir() or any(home.iterdir())):
        raise RestoreProblem(f"{home} is not empty: a restore fills an empty home, or makes a new one")
    created = not home.exists()
    private_folder(home)
    try:
        manifest = unpack(archive, home / STAGING, allowed=PARTS)
        _check_postgres(manifest)
        for entry in sorted((home / STAGING).iterdir()):
            os.replace(entry, home / entry.name)
        (home / STAGING).rmdir()
        marked = republish_unapplied(home)
    except BaseException:
        _empty(home, remove=created)
        raise
    summary = {key: value for key, value in manifest.items() if key != "files"}
    return summary | {"home": str(home), "files": len(manifest["files"]), "events_to_publish_again": marked}


def _check_postgres(manifest: dict[str, Any]) -> None:
    made = str(manifest.get("postgres", {}).get("major", "?"))
    here = postgres_version().split(".")[0]
    if made != here:
        raise RestoreProblem(
            f"the archive holds a PostgreSQL {made} cluster and this installation runs PostgreSQL {here}: "
            "a physical copy opens only under the major version that made it"
        )


def _empty(home: Path, *, remove: bool) -> None:
    """Undo a restore that failed: the home was empty, so everything in it is the restore's."""
    for entry in home.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    if remove:
        home.rmdir()


def republish_unapplied(home: Path) -> dict[str, int]:
    """Start the restored cluster alone, mark its unapplied events (shared.redelivery), stop it."""
    password = json.loads((home / "pg-passwords.json").read_text())[PG_SUPERUSER]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")} | {"LC_ALL": "C.UTF-8"}
    child = postgres_child(home, port, env, password)
    child.start()
    try:
        what = f"the restored PostgreSQL (see {home / 'logs' / 'postgres.log'})"
        wait_until(partial(port_open, port), timeout=START_SECONDS, what=what, alive=child.alive)
        return asyncio.run(_redeliver(port, password))
    finally:
        child.stop()


async def _redeliver(port: int, password: str) -> dict[str, int]:
    dsn = partial(postgres_dsn, port, user=PG_SUPERUSER, password=password)
    # A restored cluster replays its WAL before it takes logins; the port answers before that.
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            conn = await asyncpg.connect(dsn(database="postgres"))
            await conn.close()
            break
        except (OSError, asyncpg.PostgresError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    return await redeliver(dsn(database="workspace"), [dsn(database=name) for name in ALL_PROCESSES])
