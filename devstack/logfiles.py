"""The local stack's log files: one per process kind under `$DOSSIER_HOME/logs/`, rotated by size.

Every process of a kind (a service's replicas, a gateway's workers) appends to `<service>.log`: the
supervisor opens it O_APPEND as the process's stdout and stderr, and each process writes a log line in one
write(2) (shared.observe.LogFileHandler), so lines of several writers never mix within a line; each line
names its `process`.

One owner rotates: the supervisor, which looks at the sizes every CHECK_SECONDS. Writers never rotate (two
workers renaming one file at once would lose a backup). When `<name>.log` has reached
`DOSSIER_LOG_MAX_BYTES`, the backups shift (`.1` → `.2` …, the oldest past `DOSSIER_LOG_BACKUPS` dropped)
and the file becomes `<name>.log.1`:
- a Dossier process's file is renamed; its writers notice within a moment (LogFileHandler) and reopen
  the name, and what they write meanwhile lands in `.1`, so no line is lost;
- the servers' files (NATS, PostgreSQL, the object store, the consumer guard, and any other) are written
  by programs that keep their descriptor: they are copied to `.1` and then cut to nothing in place, which
  their O_APPEND writes survive; a line written in the instant between the last read and the cut is lost
  (they write a few lines an hour), and a line the copy finds half written is waited for, so that the
  backup ends with a whole line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Mapping
from pathlib import Path

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_BACKUPS = 5
MIN_MAX_BYTES = 4096
MAX_BACKUPS = 100
CHECK_SECONDS = 1.0
# How long a copy-and-cut waits, at most, for the end of a line it found half written (see _copy_and_cut).
LINE_END_TRIES = 50
LINE_END_WAIT = 0.002


def log_limits(env: Mapping[str, str]) -> tuple[int, int]:
    """(DOSSIER_LOG_MAX_BYTES, DOSSIER_LOG_BACKUPS), refused with a message when malformed."""
    limits = []
    for name, default, lowest, highest in (
        ("DOSSIER_LOG_MAX_BYTES", DEFAULT_MAX_BYTES, MIN_MAX_BYTES, None),
        ("DOSSIER_LOG_BACKUPS", DEFAULT_BACKUPS, 1, MAX_BACKUPS),
    ):
        raw = env.get(name) or str(default)
        if not raw.isdigit() or int(raw) < lowest or (highest is not None and int(raw) > highest):
            upper = f" to {highest}" if highest is not None else " or more"
            raise SystemExit(f"{name}={raw!r}: expected a whole number from {lowest}{upper}")
        limits.append(int(raw))
    return limits[0], limits[1]


def backup(path: Path, n: int) -> Path:
    return path.with_name(f"{path.name}.{n}")


def rotate(path: Path, backups: int, *, renamed: bool) -> None:
    """`path` becomes `path.1`, after the older backups shifted up one; `renamed`: its writers reopen the
    name (else it is copied and cut, see the module's note)."""
    backup(path, backups).unlink(missing_ok=True)
    for n in range(backups - 1, 0, -1):
        try:
            os.replace(backup(path, n), backup(path, n + 1))
        except FileNotFoundError:
            pass
    if renamed:
        os.replace(path, backup(path, 1))
        # There at once for a reader that follows the name; a writer that got there first made it already.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        return
    _copy_and_cut(path, backup(path, 1))


def _copy_and_cut(path: Path, target: Path) -> None:
    source = os.open(path, os.O_RDWR)
    try:
        copy = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            # Read until nothing more comes, the writers' last lines included, then cut at once. A read can
            # see the start of a write still in progress (the kernel grows the file a page at a time, and a
            # read does not wait for the write): when the copy ends amid a line, its rest comes within a
            # moment, so the copy waits for it (a little while at most) rather than keep half a line.
            last = b"\n"
            for waited in range(LINE_END_TRIES + 1):
                while chunk := os.read(source, 1 << 20):
                    os.write(copy, chunk)
                    last = chunk[-1:]
                # Read once more after each wait, the last one too: what came during it is copied, not cut.
                if last == b"\n" or waited == LINE_END_TRIES:
                    break
                time.sleep(LINE_END_WAIT)
            os.ftruncate(source, 0)
        finally:
            os.close(copy)
    finally:
        os.close(source)


class LogRotation:
    """The supervisor's rotation of every `*.log` in `folder`; `renamed`: the names whose writers reopen."""

    def __init__(self, folder: Path, env: Mapping[str, str], renamed: Collection[str]):
        self.folder = folder
        self.max_bytes, self.backups = log_limits(env)
        self.renamed = set(renamed)
        self._checked = 0.0

    def check(self, now: float | None = None) -> list[Path]:
        """Rotate the files that reached the limit (at most once every CHECK_SECONDS); returns them."""
        now = time.monotonic() if now is None else now
        if now - self._checked < CHECK_SECONDS:
            return []
        self._checked = now
        rotated = []
        for path in sorted(self.folder.glob("*.log")):
            try:
                if path.stat().st_size < self.max_bytes:
                    continue
                rotate(path, self.backups, renamed=path.name in self.renamed)
            except FileNotFoundError:
                continue
            rotated.append(path)
        return rotated
