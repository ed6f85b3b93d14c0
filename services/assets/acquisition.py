"""Getting the bytes of a new version onto local disk, verified: from object storage, or an approved root.

Both paths stage a private temporary copy that is hashed while it is written and bounded by the byte limit,
so what is parsed and what is recorded are the same bytes. No path here ever fetches a URL.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from shared.blobs import Blobs, TooManyBytes
from shared.contracts.assets import BlobRef
from shared.errors import Invalid, NotFound, Timeout, TooLarge

_ROOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_CHUNK = 1024 * 1024


@dataclass
class StagedFile:
    path: Path
    sha256: str
    size: int
    # The imported file's own name (an upload's name comes with its request).
    name: str = ""

    def discard(self) -> None:
        """The file and its per-job folder."""
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()


# Approved import roots by (scope, name); scope None: a root every scope may import from.
Roots = dict[tuple[str | None, str], Path]


def parse_roots(setting: str) -> Roots:
    """`name=/abs/dir` (every scope) or `scope/name=/abs/dir` (that scope alone), separated by `,`. A
    malformed setting stops the service rather than widening what it may read."""
    roots: Roots = {}
    for item in filter(None, (part.strip() for part in setting.split(","))):
        label, sep, directory = (x.strip() for x in item.partition("="))
        scope, slash, name = label.rpartition("/")
        if not sep or not _ROOT_NAME.fullmatch(name) or (slash and not _ROOT_NAME.fullmatch(scope)):
            raise ValueError(f"DOSSIER_APPROVED_ROOTS: {item!r} is not name=/abs/dir or scope/name=/abs/dir")
        if not os.path.isabs(directory):
            raise ValueError(f"DOSSIER_APPROVED_ROOTS: the root {label!r} is not an absolute path")
        key = (scope or None, name)
        if key in roots:
            raise ValueError(f"DOSSIER_APPROVED_ROOTS: the root {label!r} is named twice")
        roots[key] = Path(directory)
    return roots


def roots_of(roots: Roots, scope: str) -> dict[str, Path]:
    """The roots a scope may import from, by name: its own, then those of every scope."""
    shared = {name: path for (owner, name), path in roots.items() if owner is None}
    return shared | {name: path for (owner, name), path in roots.items() if owner == scope}


def _new_temp() -> tuple[int, Path]:
    """A private folder (0700) per job holding its one file: the parser is handed the file's descriptor,
    never a shared folder where other jobs' files sit."""
    folder = Path(tempfile.mkdtemp(prefix="dossier-asset-"))
    path = folder / "input"
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), path


def _remove(path: Path) -> None:
    StagedFile(path, "", 0).discard()


async def stage_blob(blobs: Blobs, blob: BlobRef, *, max_bytes: int) -> StagedFile:
    """Copy the object to a temporary file; its size and sha256 must be the ones the message claims."""
    if blob.size > max_bytes:
        raise TooLarge("the file is larger than the limit", {"field": "file", "limit": max_bytes})
    if blob.size == 0:
        raise Invalid("the file is empty", {"field": "file"})
    if blob.bucket != blobs.bucket:
        raise Invalid("the blob is not in the assets bucket", {"field": "blob.bucket"})
    fd, path = _new_temp()
    os.close(fd)
    try:
        # Streamed to disk and hashed on the way: a file is never whole in this process's memory.
        digest, size = await blobs.download(blob.key, path, max_bytes=max_bytes)
    except TooManyBytes as exc:
        _remove(path)
        raise TooLarge("the file is larger than the limit", {"field": "file", "limit": max_bytes}) from exc
    except Exception as exc:
        _remove(path)
        raise Invalid("the uploaded bytes are not in object storage", {"field": "blob.key"}) from exc
    if digest != blob.sha256 or size != blob.size:
        _remove(path)
        raise Invalid("the stored bytes do not match the declared sha256 and size", {"field": "blob.sha256"})
    return StagedFile(path, digest, size)


def import_base(roots: dict[str, Path], root: str, relative: str) -> Path:
    """The approved root `root` for `relative`, both checked before any file is touched (no I/O here)."""
    base = roots.get(root)
    if base is None:
        # The names only (never the directories): what a person may type instead.
        raise Invalid(f"{root!r} is not an approved root", {"field": "root", "roots": sorted(roots)})
    if "\x00" in relative or os.path.isabs(relative) or relative.startswith("~"):
        raise Invalid("the path must be relative to the root", {"field": "path"})
    return base


def resolve_import(base: Path, root: str, relative: str) -> tuple[Path, Path]:
    """The real root and the real path of `relative` inside it; anything that leaves the root is invalid."""
    try:
        real_base = base.resolve(strict=True)
    except OSError as exc:
        raise Invalid(f"the approved root {root!r} is not available", {"field": "root"}) from exc
    # Resolve without requiring existence first, so that probing outside the root learns nothing.
    candidate = (real_base / relative).resolve(strict=False)
    if not candidate.is_relative_to(real_base) or candidate == real_base:
        raise Invalid("the path leaves the approved root", {"field": "path"})
    return real_base, candidate


# Looked at, not opened: an O_PATH descriptor reads nothing and runs no driver's open, so neither a FIFO
# (whose open waits for a writer) nor a device can act before the checks below have seen what it is. With
# O_NOFOLLOW a last component that became a symlink after resolution is held as the link itself.
_LOOK = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
# The open for reading, of a file already known to be regular: O_NONBLOCK still, so a lease another
# process holds on it is refused at once instead of waiting out the lease break.
_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NOT_REGULAR = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


def not_a_file(mode: int) -> Invalid:
    what = _NOT_REGULAR.get(stat.S_IFMT(mode), "not a regular file")
    return Invalid(f"the path is {what}; only regular files are imported", {"field": "path", "type": what})


def open_regular(real_base: Path, candidate: Path) -> int:
    """A descriptor open for reading on the regular file at `candidate` inside `real_base`, or a refusal.

    Every check is made on a descriptor, not on the path: the path may name another file by the time it is
    opened (a swapped component, a file replaced by a FIFO), but a descriptor names one file for ever.
    """
    try:
        look = os.open(candidate, _LOOK)
    except FileNotFoundError as exc:
        raise NotFound("no such file in the approved root", {"field": "path"}) from exc
    except OSError as exc:
        raise Invalid("the path cannot be read as a file", {"field": "path"}) from exc
    try:
        # A directory component swapped for a symlink after resolution is caught here, on the open file.
        if not Path(os.readlink(f"/proc/self/fd/{look}")).is_relative_to(real_base):
            raise Invalid("the path leaves the approved root", {"field": "path"})
        seen = os.fstat(look)
        if not stat.S_ISREG(seen.st_mode):
            raise not_a_file(seen.st_mode)
        try:
            # Through the descriptor, not the path: exactly the file that was checked.
            fd = os.open(f"/proc/self/fd/{look}", _READ)
        except OSError as exc:
            raise Invalid("the file cannot be opened for reading (or is locked)", {"field": "path"}) from exc
    finally:
        os.close(look)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino) or not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        raise Invalid("the file changed while it was opened", {"field": "path"})
    return fd


def copy_bounded(fd: int, out: int, *, max_bytes: int, deadline: float) -> tuple[str, int]:
    """Copy until the end of the file, hashing: no more than `max_bytes` (a file may grow while it is read)
    and no later than `deadline` (time.monotonic), checked between chunks."""
    digest = hashlib.sha256()
    size = 0
    while chunk := os.read(fd, _CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise TooLarge("the file is larger than the limit", {"field": "path", "limit": max_bytes})
        if time.monotonic() > deadline:
            raise Timeout("the file could not be read in time", {"field": "path"})
        digest.update(chunk)
        _write_all(out, chunk)
    return digest.hexdigest(), size


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def stage_import(base: Path, root: str, relative: str, *, max_bytes: int, deadline: float) -> StagedFile:
    """Resolve inside the root, open only a regular file, then copy it bounded by size and time.

    It blocks (every step touches the root's file system), so it runs on an import thread
    (services.assets.import_threads), never on the event loop.
    """
    real_base, candidate = resolve_import(base, root, relative)
    fd = open_regular(real_base, candidate)
    try:
        if os.fstat(fd).st_size > max_bytes:
            raise TooLarge("the file is larger than the limit", {"field": "path", "limit": max_bytes})
        out, path = _new_temp()
        try:
            try:
                digest, size = copy_bounded(fd, out, max_bytes=max_bytes, deadline=deadline)
            finally:
                os.close(out)
        except BaseException:
            _remove(path)
            raise
    finally:
        os.close(fd)
    return StagedFile(path, digest, size, candidate.name)
