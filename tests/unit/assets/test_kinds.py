"""Sniffing by content: the bytes decide, never the name."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from services.assets.acquisition import parse_roots, roots_of
from services.assets.kinds import sniff
from tests.support import documents


def zipped(names: list[str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for name in names:
            zf.writestr(name, b"<x/>")
    return out.getvalue()


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"%PDF-1.4\n...", "pdf"),
        (b"\n\n  <!DOCTYPE html><p>x", "html"),
        (b"\xef\xbb\xbf<html><body>x", "html"),
        (b"<P>shouting", "html"),
        (b"plain notes, caf\xc3\xa9\n", "text"),
        (b"<svg><script>alert(1)</script></svg>", "text"),  # not HTML by the table; stored as inert text
        (zipped(["[Content_Types].xml", "word/document.xml"]), "docx"),
        (zipped(["[Content_Types].xml", "xl/workbook.xml"]), "xlsx"),
        (zipped(["word/document.xml"]), None),
        (zipped(["a.txt"]), None),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, None),  # legacy .doc/.xls
        (b"caf\xe9 latin-1 only", None),
        (documents.random_bytes(), None),
    ],
)
def test_sniff(tmp_path: Path, data: bytes, kind: str | None) -> None:
    path = tmp_path / "upload.docx"
    path.write_bytes(data)
    assert sniff(path, max_zip_entries=100) == kind


def test_a_zip_with_too_many_entries_is_not_listed(tmp_path: Path) -> None:
    path = tmp_path / "many"
    path.write_bytes(zipped(["[Content_Types].xml", "word/document.xml", *[f"x/{i}" for i in range(200)]]))
    assert sniff(path, max_zip_entries=100) is None
    assert sniff(path, max_zip_entries=1000) == "docx"


def test_approved_roots_setting() -> None:
    assert parse_roots("") == {}
    roots = parse_roots("docs=/srv/docs, inbox=/tmp/in, acme/inbox=/srv/acme, acme/own=/srv/own")
    assert roots == {
        (None, "docs"): Path("/srv/docs"),
        (None, "inbox"): Path("/tmp/in"),
        ("acme", "inbox"): Path("/srv/acme"),
        ("acme", "own"): Path("/srv/own"),
    }
    # A scope sees the roots of every scope and its own (its own winning a shared name); no other's.
    assert roots_of(roots, "acme") == {"docs": Path("/srv/docs"), "inbox": Path("/srv/acme"), "own": Path("/srv/own")}
    assert roots_of(roots, "globex") == {"docs": Path("/srv/docs"), "inbox": Path("/tmp/in")}
    for bad in ("docs", "docs=relative/dir", "../x=/srv", "=/srv", "a/b/c=/srv", "/docs=/srv", "docs=/a,docs=/b"):
        with pytest.raises(ValueError):
            parse_roots(bad)
