"""The backup archive's format: what it writes comes back byte for byte, and anything else is refused."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from devstack.archive import ArchiveWriter, Corrupt, unpack

PARTS = frozenset({"objects", "admin-token"})


def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    (root / "objects" / "dossier" / "sha256" / "ab").mkdir(parents=True)
    (root / "objects" / "dossier" / "uploads").mkdir()
    (root / "objects" / "dossier" / "sha256" / "ab" / "abc").write_bytes(b"bytes of an object")
    (root / "objects" / "dossier" / "uploads" / "up_1").write_bytes(b"staged")
    (root / "admin-token").write_text("adm_secret\n")
    return root


def write(tmp_path: Path) -> Path:
    source = home(tmp_path)
    archive = tmp_path / "backup.tar.gz"
    writer = ArchiveWriter(archive)
    writer.add_tree(source / "objects", "objects", skip=lambda rel: rel.startswith("dossier/uploads"))
    writer.add_file(source / "admin-token", "admin-token")
    writer.finish({"made_by": "test"})
    return archive


def test_what_is_written_comes_back_and_nothing_skipped(tmp_path: Path) -> None:
    archive = write(tmp_path)
    assert archive.stat().st_mode & 0o077 == 0
    manifest = unpack(archive, tmp_path / "out", allowed=PARTS)
    assert manifest["made_by"] == "test" and set(manifest["files"]) == {"objects/dossier/sha256/ab/abc", "admin-token"}
    assert (tmp_path / "out" / "objects" / "dossier" / "sha256" / "ab" / "abc").read_bytes() == b"bytes of an object"
    assert (tmp_path / "out" / "admin-token").stat().st_mode & 0o777 == 0o600
    assert not (tmp_path / "out" / "objects" / "dossier" / "uploads").exists()


def rewritten(archive: Path, change: dict[str, bytes | None], extra: Sequence[tarfile.TarInfo] = ()) -> Path:
    """The same archive with members' bytes replaced (None drops one) and `extra` members added first."""
    out = archive.with_name("changed.tar.gz")
    with tarfile.open(archive, "r:gz") as old, tarfile.open(out, "w:gz") as new:
        for info in extra:
            new.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
        for member in old:
            source = old.extractfile(member)
            data = source.read() if source is not None else None
            if member.name in change:
                data = change[member.name]
                if data is None:
                    continue
                member.size = len(data)
            new.addfile(member, io.BytesIO(data) if data is not None else None)
    return out


def member(name: str, kind: bytes = tarfile.REGTYPE, size: int = 1) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size if kind == tarfile.REGTYPE else 0
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    return info


@pytest.mark.parametrize(
    ("change", "extra", "says"),
    [
        ({"admin-token": b"adm_other\n"}, [], "changed"),
        ({"admin-token": None}, [], "missing"),
        ({}, [member("objects/dossier/planted")], "not in its manifest"),
        ({}, [member("objects/../../escape")], "not a plain relative path"),
        ({}, [member("/etc/cron.d/x")], "not a plain relative path"),
        ({}, [member("objects/link", tarfile.SYMTYPE)], "not a plain file or folder"),
        ({}, [member("bin/sh")], "not part of a Dossier backup"),
        ({"manifest.json": b"{not json"}, [], "manifest does not parse"),
        ({"manifest.json": None}, [], "manifest.json is missing"),
    ],
)
def test_an_archive_that_differs_from_its_manifest_is_refused(
    tmp_path: Path, change: dict[str, bytes | None], extra: list[tarfile.TarInfo], says: str
) -> None:
    bad = rewritten(write(tmp_path), change, extra)
    with pytest.raises(Corrupt, match=says):
        unpack(bad, tmp_path / "out", allowed=PARTS)
