"""Reading the local stack's log files (`$DOSSIER_HOME/logs/`) for `dossier logs`: every file of a kind with
its rotated backups, merged in time order, and followed as it grows and rotates.

A kind is a file's name without `.log` (`gateway`, `workspace`, `nats`, `postgres`, …); its backups are
`<kind>.log.1` (the newest) to `<kind>.log.N` (devstack/logfiles.py). A JSON line is ordered by its `ts`;
a server's plain line by the time it starts with (as local time unless it says UTC), else by the line
before it in its file.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# `2026-11-30 10:12:03.120 UTC` (PostgreSQL), `[71] 2026/11/30 10:12:03.120456 [INF]` (NATS).
_STAMP = re.compile(r"(\d{4})[-/](\d\d)[-/](\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?( ?(?:UTC|Z|\+00:?00))?")
# A process of a kind: `gateway-w2` (a gateway's worker), `workspace.2` (a replica), `gateway.2-w3`.
_PROCESS = re.compile(r"(?P<kind>[a-z]+)(?:\.\d+)?(?:-w\d+)?")


@dataclass(frozen=True)
class Entry:
    key: str  # the time as `YYYY-MM-DDTHH:MM:SS.mmm+00:00` ("" when nothing says it), for ordering
    kind: str
    text: str  # the line as written
    data: dict[str, Any] | None  # the JSON line, None for a plain one

    @property
    def process(self) -> str:
        if self.data is None:
            return self.kind
        named = self.data.get("process")
        if isinstance(named, str) and named:
            return named
        # A line of an earlier release, in a file of its process's own (`workspace.2.log`, `gateway-w2.log`).
        worker = self.data.get("worker")
        if isinstance(worker, int) and worker > 1 and "-w" not in self.kind:
            return f"{self.kind}-w{worker}"
        return self.kind


def plain_time(text: str) -> str | None:
    """The time a server's plain line starts with (in its first 40 characters), as a sort key in UTC."""
    found = _STAMP.search(text, 0, 40)
    if found is None:
        return None
    year, month, day, hour, minute, second, fraction, utc = found.groups()
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micros)
    except ValueError:
        return None
    moment = moment.replace(tzinfo=UTC) if utc else moment.astimezone(UTC)
    return moment.isoformat(timespec="milliseconds")


def parse(raw: bytes, kind: str, before: str) -> Entry:
    text = raw.decode("utf-8", "replace").rstrip("\r")
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            ts = data.get("ts")
            return Entry(ts if isinstance(ts, str) else before, kind, text, data)
    return Entry(plain_time(text) or before, kind, text, None)


def kind_of(process: str) -> str | None:
    """The kind (file) a process name writes to: `gateway-w2` → `gateway`; None for no process name."""
    found = _PROCESS.fullmatch(process)
    return found.group("kind") if found else None


def kinds(folder: Path) -> list[str]:
    return sorted(path.name.removesuffix(".log") for path in folder.glob("*.log"))


def backups(folder: Path, kind: str) -> list[Path]:
    """The rotated files of a kind, oldest first."""
    numbered = []
    for path in folder.glob(f"{kind}.log.*"):
        suffix = path.name.rpartition(".")[2]
        if suffix.isdigit():
            numbered.append((int(suffix), path))
    return [path for _, path in sorted(numbered, reverse=True)]


def _lines(handle: Any, kind: str) -> Iterator[Entry]:
    key = ""
    for raw in handle:
        entry = parse(raw.removesuffix(b"\n"), kind, key)
        key = entry.key
        yield entry


# How long a file renamed away is still read: a writer moves to the new file within half a second
# (shared.observe.FOLLOW_SECONDS), and writes its lines into the renamed one until then.
RENAMED_READ_SECONDS = 3.0


class Tail:
    """The current file of one kind, read to its end and then followed across rotations."""

    def __init__(self, folder: Path, kind: str):
        self.path = folder / f"{kind}.log"
        self.kind = kind
        self.fd: int | None = None
        self.pending = b""
        self.key = ""
        # Files renamed away, still read for a moment: (descriptor, its unfinished line, until when).
        self.renamed: list[tuple[int, bytes, float]] = []
        self._open()

    def _open(self) -> None:
        try:
            self.fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self.fd = None
        self.pending = b""

    def history(self) -> Iterator[Entry]:
        """What the file holds now; a last line still being written waits for `new`."""
        if self.fd is None:
            return
        with open(self.fd, "rb", closefd=False) as handle:
            for raw in handle:
                if not raw.endswith(b"\n"):
                    self.pending = raw
                    break
                entry = parse(raw[:-1], self.kind, self.key)
                self.key = entry.key
                yield entry

    def _read(self, fd: int, pending: bytes) -> tuple[list[Entry], bytes]:
        chunks = [pending]
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        *complete, pending = b"".join(chunks).split(b"\n")
        entries = []
        for raw in complete:
            entry = parse(raw, self.kind, self.key)
            self.key = entry.key
            entries.append(entry)
        return entries, pending

    def _read_current(self) -> list[Entry]:
        if self.fd is None:
            return []
        entries, self.pending = self._read(self.fd, self.pending)
        return entries

    def new(self) -> list[Entry]:
        """The lines written since the last look: to the file of that name, and to one renamed away lately
        (by a writer that had not yet moved)."""
        entries = self._read_renamed()
        if self.fd is None:
            self._open()
            return entries + self._read_current()
        entries += self._read_current()
        try:
            there = os.stat(self.path)
        except FileNotFoundError:
            return entries
        here = os.fstat(self.fd)
        if (there.st_dev, there.st_ino) != (here.st_dev, here.st_ino):
            # Renamed to `.1`: read on for a moment; the name is a new file, read from its top.
            self.renamed.append((self.fd, self.pending, time.monotonic() + RENAMED_READ_SECONDS))
            self._open()
            entries += self._read_current()
        elif here.st_size < os.lseek(self.fd, 0, os.SEEK_CUR):
            os.lseek(self.fd, 0, os.SEEK_SET)  # copied to `.1` and cut in place: start again at its top
            self.pending = b""
            entries += self._read_current()
        return entries

    def _read_renamed(self) -> list[Entry]:
        entries: list[Entry] = []
        kept = []
        for fd, pending, until in self.renamed:
            more, pending = self._read(fd, pending)
            entries += more
            if time.monotonic() < until:
                kept.append((fd, pending, until))
            else:
                os.close(fd)
        self.renamed = kept
        return entries

    def close(self) -> None:
        for fd, _, _ in self.renamed:
            os.close(fd)
        self.renamed = []
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def history(folder: Path, tails: Iterable[Tail]) -> Iterator[Entry]:
    """Every line of these kinds, backups first, merged in time order. Each file is in order but for the
    lines of several writers a moment apart, and a rotated file gets the last lines of writers that had not
    yet moved: so files are merged, not just put one after the other."""
    streams: list[Iterator[Entry]] = []
    handles = []
    for tail in tails:
        for path in backups(folder, tail.kind):
            try:
                handle = open(path, "rb")  # closed below, once the merge is read
            except FileNotFoundError:
                continue
            handles.append(handle)
            streams.append(_lines(handle, tail.kind))
        streams.append(tail.history())
    try:
        yield from heapq.merge(*streams, key=lambda entry: entry.key)
    finally:
        for handle in handles:
            handle.close()
