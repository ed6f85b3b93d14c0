"""The backup archive: a gzip'd tar of parts of a $DOSSIER_HOME, with the SHA-256 of every file in a manifest.

The members are the home's own paths (`postgres/...`, `objects/dossier/...`, `admin-token`, ...), folders
and regular files only, and `manifest.json` last: written once every file has gone through the hash. Reading
checks while it extracts: a member that is not a plain file or folder, a path that leaves the target, a
gzip or tar stream that does not decode, a file whose bytes differ from its manifest entry, a file missing
from either side, all make the archive `Corrupt`, and nothing of it is used.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

FORMAT = "dossier-backup/1"
MANIFEST = "manifest.json"
# The manifest lists every file; beyond this it is not one this code wrote.
MAX_MANIFEST_BYTES = 256 * 1024 * 1024
_CHUNK = 1024 * 1024


class Corrupt(Exception):
    """The archive cannot be trusted; the message says where it failed."""


class _Hashing(io.RawIOBase):
    """A file read through SHA-256 (tarfile copies from it)."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        self.digest.update(data)
        return data

    def readable(self) -> bool:
        return True


class ArchiveWriter:
    """`add_*` the parts, then `finish(manifest)`; the archive is complete only once that returned."""

    def __init__(self, path: Path):
        # Created 0600 whatever the umask: the archive holds every secret of the home.
        self._file = os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
        self._tar = tarfile.open(fileobj=self._file, mode="w:gz", compresslevel=6)
        self.files: dict[str, dict[str, Any]] = {}

    def _info(self, source: Path, name: str) -> tarfile.TarInfo:
        info = self._tar.gettarinfo(str(source), arcname=name)
        # The archive says nothing of this machine's users; a restore makes everything its own (0600/0700).
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mode = 0o700 if info.isdir() else 0o600
        # Whole seconds: a fraction would cost every member an extended (pax) header.
        info.mtime = int(info.mtime)
        return info

    def add_file(self, source: Path, name: str) -> None:
        info = self._info(source, name)
        if not info.isfile():
            raise ValueError(f"{source} is not a regular file")
        with open(source, "rb") as raw:
            hashing = _Hashing(raw)
            self._tar.addfile(info, hashing)  # type: ignore[arg-type]
        self.files[name] = {"sha256": hashing.digest.hexdigest(), "size": info.size}

    def add_tree(self, source: Path, name: str, *, skip: Callable[[str], bool] = lambda _: False) -> None:
        """A folder, its subfolders and regular files, in name order; `skip(path relative to source)`."""
        self._tar.addfile(self._info(source, name))
        for folder, dirs, files in os.walk(source):
            dirs.sort()
            base = Path(folder)
            relative = base.relative_to(source)
            for entry in list(dirs):
                rel = (relative / entry).as_posix()
                if skip(rel + "/"):
                    dirs.remove(entry)
                    continue
                self._tar.addfile(self._info(base / entry, f"{name}/{rel}"))
            for entry in sorted(files):
                rel = (relative / entry).as_posix()
                if not skip(rel) and (base / entry).is_file() and not (base / entry).is_symlink():
                    self.add_file(base / entry, f"{name}/{rel}")

    def finish(self, manifest: dict[str, Any]) -> dict[str, Any]:
        manifest = {"format": FORMAT, **manifest, "files": self.files}
        data = json.dumps(manifest, indent=1, sort_keys=True).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size, info.mode = len(data), 0o600
        self._tar.addfile(info, io.BytesIO(data))
        self.close()
        return manifest

    def close(self) -> None:
        self._tar.close()
        self._file.close()


def _member_path(name: str, allowed: frozenset[str]) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or any(part in ("", ".", "..") for part in path.parts) or not path.parts:
        raise Corrupt(f"the member {name!r} is not a plain relative path")
    if path.parts[0] not in allowed and name != MANIFEST:
        raise Corrupt(f"the member {name!r} is not part of a Dossier backup")
    return path


def _extract_file(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> dict[str, Any]:
    source = tar.extractfile(member)
    assert source is not None
    digest, size = hashlib.sha256(), 0
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
        while chunk := source.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    return {"sha256": digest.hexdigest(), "size": size}


def unpack(archive: Path, into: Path, *, allowed: frozenset[str]) -> dict[str, Any]:
    """Extract `archive` into the empty folder `into`, checking every file against the manifest; the
    manifest, or `Corrupt`. `allowed` names the top-level entries a backup may hold."""
    seen: dict[str, dict[str, Any]] = {}
    manifest_bytes: bytes | None = None
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                path = _member_path(member.name, allowed)
                name = path.as_posix()
                if name in seen or (name == MANIFEST and manifest_bytes is not None):
                    raise Corrupt(f"the member {name!r} appears twice")
                if member.isdir():
                    into.joinpath(*path.parts).mkdir(mode=0o700, parents=True, exist_ok=True)
                elif not member.isfile():
                    raise Corrupt(f"the member {name!r} is not a plain file or folder")
                elif name == MANIFEST:
                    if member.size > MAX_MANIFEST_BYTES:
                        raise Corrupt("the manifest is too large")
                    source = tar.extractfile(member)
                    assert source is not None
                    manifest_bytes = source.read()
                else:
                    seen[name] = _extract_file(tar, member, into.joinpath(*path.parts))
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise Corrupt(f"it does not decode as a gzip'd tar ({type(exc).__name__}: {exc})") from None
    if manifest_bytes is None:
        # tarfile stops at a member header that does not read; the manifest, last, is then never reached.
        raise Corrupt("its manifest.json is missing: the archive is damaged or cut short, or not a Dossier backup")
    return _checked(manifest_bytes, seen)


def _checked(manifest_bytes: bytes, seen: dict[str, dict[str, Any]]) -> dict[str, Any]:
    try:
        manifest = json.loads(manifest_bytes)
        files = manifest["files"]
        if manifest["format"] != FORMAT:
            raise Corrupt(f"its format is {manifest['format']!r}; this version reads {FORMAT!r}")
    except (ValueError, KeyError, TypeError) as exc:
        raise Corrupt(f"its manifest does not parse ({type(exc).__name__}: {exc})") from None
    missing = sorted(set(files) - set(seen))
    extra = sorted(set(seen) - set(files))
    changed = sorted(name for name in set(files) & set(seen) if files[name] != seen[name])
    for what, names in (("missing", missing), ("not in its manifest", extra), ("changed", changed)):
        if names:
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            raise Corrupt(f"{len(names)} of its files are {what}: {shown}")
    return dict(manifest)
