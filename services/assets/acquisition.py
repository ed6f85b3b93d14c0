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
from dataclasses import dataclass
from pathlib import Path

from shared.blobs import Blobs, TooManyBytes
from shared.contracts.assets import BlobRef
from shared.errors import Invalid, NotFound, TooLarge

_ROOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_CHUNK = 1024 * 1024


@dataclass
class StagedFile:
    path: Path
    sha256: str
    size: int

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


def resolve_import(roots: dict[str, Path], root: str, relative: str) -> Path:
    """The real path of `relative` inside the approved root `root`; anything that leaves the root is invalid."""
    base = roots.get(root)
    if base is None:
        # The names only (never the directories): what a person may type instead.
        raise Invalid(f"{root!r} is not an approved root", {"field": "root", "roots": sorted(roots)})
    if "\x00" in relative or os.path.isabs(relative) or relative.startswith("~"):
        raise Invalid("the path must be relative to the root", {"field": "path"})
    try:
        real_base = base.resolve(strict=True)
    except OSError as exc:
        raise Invalid(f"the approved root {root!r} is not available", {"field": "root"}) from exc
    # Resolve without requiring existence first, so that probing outside the root learns nothing.
    candidate = (real_base / relative).resolve(strict=False)
    if not candidate.is_relative_to(real_base) or candidate == real_base:
        raise Invalid("the path leaves the approved root", {"field": "path"})
    return candidate


def stage_import(real_base: Path, candidate: Path, *, max_bytes: int) -> StagedFile:
    """Open without following a final symlink, re-check the opened file's real path, then copy it bounded."""
    try:
        fd = os.open(candidate, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise NotFound("no such file in the approved root", {"field": "path"}) from exc
    except OSError as exc:
        raise Invalid("the path cannot be read as a file", {"field": "path"}) from exc
    try:
        # A directory component swapped for a symlink after resolution is caught here, on the open file.
        opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if not opened.is_relative_to(real_base):
            raise Invalid("the path leaves the approved root", {"field": "path"})
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Invalid("the path is not a regular file", {"field": "path"})
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as src:
        if os.fstat(fd).st_size > max_bytes:
            raise TooLarge("the file is larger than the limit", {"field": "path", "limit": max_bytes})
        digest = hashlib.sha256()
        size = 0
        out_fd, path = _new_temp()
        try:
            with os.fdopen(out_fd, "wb") as out:
                while chunk := src.read(_CHUNK):
                    size += len(chunk)
                    if size > max_bytes:
                        raise TooLarge("the file is larger than the limit", {"field": "path", "limit": max_bytes})
                    digest.update(chunk)
                    out.write(chunk)
        except BaseException:
            _remove(path)
            raise
    return StagedFile(path, digest.hexdigest(), size)
