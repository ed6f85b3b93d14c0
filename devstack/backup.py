"""`dossier admin backup`: a running local stack in one archive, at one point in time across its services.

- **The databases**: one physical copy of the whole PostgreSQL cluster (`pg_basebackup`), which holds every
  service's database as of one instant, the end of the copy: no service's rows are newer than another's.
  Meanwhile writes wait at every gateway process (services/gateway/holds.py), so no client's write lands
  half before that instant and half after it. Runs and extractions already under way go on: the copy
  finds them as a crash at that instant would, and the restored stack resumes them (leases, outboxes).
- **The object bytes**, copied once the databases are: a key is written once (its content's hash, or a
  run's file under its digest), so every object a copied row names is already there; an object written
  after the copy comes along unused. Run files are deleted only once no row has named their content for
  DOSSIER_RUN_FILES_GRACE_SECONDS (10 minutes), longer than the copy takes; a run's own files from before the
  content store go just before its release (DOSSIER_RUN_RETENTION_DAYS), so a copy made in that moment
  restores a run past retention whose files answer 404 until the restored stack releases it. The gateway's staging of uploads in progress (`uploads/`) stays out.
- **The secrets the data needs**: the admin and metrics tokens, the proof-of-caller keys (outside agents
  hold grants they signed), the database passwords (the copied cluster has them), the object store's keys
  and the NATS users' passwords (outside subscribers keep theirs).
- **Not the event stream**: the restore publishes again what the consumers had not applied
  (shared.redelivery), from the outboxes, which the copy holds.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from devstack.archive import ArchiveWriter
from devstack.infra import PG_SUPERUSER, pg_bin
from shared.contracts.common import ALL_PROCESSES
from shared.objectkeys import UPLOADS

# What a home's backup holds, by top-level name; nothing else is restored from an archive.
SECRET_FILES = (
    "admin-token",
    "metrics-token",
    "pg-passwords.json",
    "s3-secrets.json",
    "nats/users.json",
    "nats/route-password",
)
PARTS = frozenset({"postgres", "objects", "proof", *(name.split("/")[0] for name in SECRET_FILES)})
# The longest writes wait if this process dies before it releases them; a copy takes seconds.
HOLD_SECONDS = 60
# localbucket's own files beside the objects: unfinished multipart uploads and files being written.
_LOCALBUCKET_PREFIX = ".localbucket-"


class BackupProblem(Exception):
    """Why no backup was made; `usage` when the command was pointed at the wrong thing."""

    def __init__(self, message: str, *, usage: bool = False):
        super().__init__(message)
        self.usage = usage


def dossier_version() -> str:
    try:
        return version("dossier")
    except PackageNotFoundError:
        return "unknown"


def postgres_version() -> str:
    """The installed PostgreSQL's version (`18.6`): a physical copy opens only under its major version."""
    done = subprocess.run([str(pg_bin() / "pg_config"), "--version"], capture_output=True, text=True, check=True)
    return done.stdout.split()[-1]


def running_state(home: Path) -> dict[str, Any]:
    """The home's `stack.json`, once its stack is known to run (it holds the home's lock while it does)."""
    if not (home / "stack.json").is_file():
        raise BackupProblem(f"no stack has run on {home} (no stack.json); start it with `make up`", usage=True)
    fd = os.open(home / "stack.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return dict(json.loads((home / "stack.json").read_text()))
    finally:
        os.close(fd)
    raise BackupProblem(f"the stack on {home} is not running; a backup copies a running stack (`make up`)", usage=True)


def copy_cluster(home: Path, port: int, into: Path) -> None:
    """Every database of the running cluster as of one instant, into the new folder `into`."""
    password = json.loads((home / "pg-passwords.json").read_text())[PG_SUPERUSER]
    argv = [str(pg_bin() / "pg_basebackup"), "-h", "127.0.0.1", "-p", str(port), "-U", PG_SUPERUSER]
    # Plain files with the WAL that makes them one instant; a checkpoint now rather than at its time.
    argv += ["-D", str(into), "-F", "p", "-X", "stream", "-c", "fast", "--no-sync"]
    env = {"PGPASSWORD": password, "PGCONNECT_TIMEOUT": "10", "LC_ALL": "C.UTF-8", "PATH": os.environ.get("PATH", "")}
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        message = done.stderr.strip()
        if "pg_hba.conf" in message and "replication" in message:
            message += " (a stack started before backups existed: restart it once, and its database allows the copy)"
        raise BackupProblem(f"pg_basebackup failed: {message}")


def _not_an_object(relative: str) -> bool:
    """localbucket's own files, and the gateway's staging of uploads under way (`<bucket>/uploads/`)."""
    parts = relative.split("/")
    return any(part.startswith(_LOCALBUCKET_PREFIX) for part in parts) or (
        len(parts) >= 2 and f"{parts[1]}/" == UPLOADS
    )


def make_backup(home: Path, out: Path, hold: Callable[[], AbstractContextManager[Any]]) -> dict[str, Any]:
    """Write the archive of the stack running on `home` to `out`; `hold()` holds writes while the databases
    are copied. Returns the manifest without its file list, and where the archive is."""
    home, out = home.resolve(), out.resolve()
    state = running_state(home)
    if out.is_dir():
        raise BackupProblem(f"{out} is a folder; --out names the archive to write", usage=True)
    if not out.parent.is_dir():
        raise BackupProblem(f"{out.parent}: no such folder", usage=True)
    staging = Path(tempfile.mkdtemp(prefix=".dossier-backup-", dir=out.parent))
    partial = out.with_name(f".{out.name}.partial")
    try:
        started = time.monotonic()
        with hold():
            copy_cluster(home, int(state["postgres_port"]), staging / "postgres")
            held = time.monotonic() - started
        manifest = _write(home, staging, partial, held)
        os.replace(partial, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        partial.unlink(missing_ok=True)
    return _summary(manifest, out)


def _write(home: Path, staging: Path, partial: Path, held: float) -> dict[str, Any]:
    writer = ArchiveWriter(partial)
    try:
        writer.add_tree(staging / "postgres", "postgres")
        if (home / "objects").is_dir():
            writer.add_tree(home / "objects", "objects", skip=_not_an_object)
        writer.add_tree(home / "proof", "proof")
        for name in SECRET_FILES:
            if (home / name).is_file():
                writer.add_file(home / name, name)
        objects = [entry for name, entry in writer.files.items() if name.startswith("objects/")]
        return writer.finish(
            {
                "dossier_version": dossier_version(),
                "created_at": datetime.now(UTC).isoformat(),
                "postgres": {
                    "version": postgres_version(),
                    "major": (staging / "postgres" / "PG_VERSION").read_text().strip(),
                    "databases": list(ALL_PROCESSES),
                },
                "objects": {"count": len(objects), "bytes": sum(entry["size"] for entry in objects)},
                "writes_held_seconds": round(held, 3),
            }
        )
    except BaseException:
        writer.close()
        raise


def _summary(manifest: dict[str, Any], out: Path) -> dict[str, Any]:
    summary = {key: value for key, value in manifest.items() if key != "files"}
    return summary | {"archive": str(out), "archive_bytes": out.stat().st_size, "files": len(manifest["files"])}
