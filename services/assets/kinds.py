"""What a file is, from its bytes alone: the client's filename and content type are never trusted.

The sniff runs in the service process on untrusted bytes, so it only reads bounded prefixes and, for zip
containers, the central directory after its entry count has been checked.
"""

from __future__ import annotations

import codecs
import os
import struct
import zipfile
from pathlib import Path

from shared.contracts.assets import Kind
from shared.sniff import HEAD_BYTES, looks_like_html

_HEAD = 64 * 1024
_TEXT_PROBE = 1024 * 1024
_CONTROL = set(range(0, 32)) - {9, 10, 12, 13}


def sniff(path: Path, *, max_zip_entries: int) -> Kind | None:
    """The kind of the file, or None when it is none of the supported ones."""
    with open(path, "rb") as fh:
        head = fh.read(_HEAD)
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return _office_kind(path, max_zip_entries)
    # The one HTML sniffer the gateway uses too, so an artifact and an evidence upload agree.
    if looks_like_html(head[:HEAD_BYTES]):
        return "html"
    if _is_utf8_text(path):
        return "text"
    return None


def _office_kind(path: Path, max_entries: int) -> Kind | None:
    count = zip_entry_count(path)
    # A document never has this many parts; listing them would already cost the service memory.
    if count is None or count > max_entries:
        return None
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    # zipfile raises NotImplementedError for compression methods it cannot read: not a zip we accept.
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError):
        return None
    if "[Content_Types].xml" not in names:
        return None
    if "word/document.xml" in names:
        return "docx"
    if "xl/workbook.xml" in names:
        return "xlsx"
    return None


def zip_entry_count(path: Path) -> int | None:
    """The entry count from the end-of-central-directory record (zip64 aware), without reading the entries."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        tail_len = min(size, 65_557)
        fh.seek(size - tail_len)
        tail = fh.read(tail_len)
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or at + 22 > len(tail):
            return None
        (count,) = struct.unpack("<H", tail[at + 10 : at + 12])
        if count != 0xFFFF:
            return int(count)
        locator = at - 20
        if locator < 0 or tail[locator : locator + 4] != b"PK\x06\x07":
            return None
        (offset,) = struct.unpack("<Q", tail[locator + 8 : locator + 16])
        if offset > size - 56:
            return None
        fh.seek(offset)
        record = fh.read(56)
        if record[:4] != b"PK\x06\x06":
            return None
        (count64,) = struct.unpack("<Q", record[32:40])
        return int(count64)


def _is_utf8_text(path: Path) -> bool:
    """UTF-8 (ASCII included) with no NUL and almost no control bytes, judged on the first MiB."""
    with open(path, "rb") as fh:
        probe = fh.read(_TEXT_PROBE)
    if not probe or b"\x00" in probe:
        return False
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        # final=False: a multi-byte character cut by the probe's end is not an error.
        text = decoder.decode(probe, final=len(probe) < _TEXT_PROBE)
    except UnicodeDecodeError:
        return False
    controls = sum(1 for ch in text if ord(ch) in _CONTROL)
    return controls <= max(1, len(text) // 1000)
