"""Is a file HTML? One answer for the gateway (artifacts) and the assets service (evidence), from the bytes.

The tag list is that of the WHATWG MIME sniffing standard ("rules for identifying an unknown MIME type"),
plus a few document-level tags that generated reports start with. Before matching, a byte-order mark
(UTF-8, UTF-16 or UTF-32) is honoured, and an XHTML file's XML declaration and comments are skipped when
an HTML start follows them. Binary bytes (a NUL after decoding) are never HTML.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path

HEAD_BYTES = 1024
# Declared types that an HTML upload may carry; the bytes must still look like HTML.
ACCEPTED_DECLARED = frozenset({"text/html", "application/xhtml+xml", "application/octet-stream", ""})
_TAGS = (
    "!doctype html|html|head|script|iframe|h1|div|font|table|a|style|title|b|body|br|p|meta|main|article|section|header"
)
_HTML_START = re.compile(rf"<!--|<(?:{_TAGS})[\s>/]", re.IGNORECASE)
# An XML declaration, then any comments or processing instructions, before the document element.
_XML_PROLOG = re.compile(r"<\?xml[^>]*\?>(?:\s|<!--.*?-->|<\?.*?\?>)*", re.IGNORECASE | re.DOTALL)
_XHTML_START = re.compile(r"<(?:!doctype\s+html|html)[\s>/]", re.IGNORECASE)
# Longest marks first: the UTF-32 LE mark begins with the UTF-16 LE one.
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def bom_encoding(raw: bytes) -> tuple[str, int] | None:
    """The encoding a byte-order mark names, and the mark's length; None without one."""
    for mark, encoding in BOMS:
        if raw.startswith(mark):
            return encoding, len(mark)
    return None


def _head_text(head: bytes) -> str | None:
    bom = bom_encoding(head)
    if bom is None:
        # No mark: ASCII-compatible bytes; only the tag characters matter, so latin-1 loses nothing.
        return head.decode("latin-1")
    encoding, skip = bom
    # The head may cut a character in two: the decoder drops the partial one.
    return codecs.getincrementaldecoder(encoding)("ignore").decode(head[skip:], final=False)


def looks_like_html(head: bytes) -> bool:
    text = _head_text(head)
    if text is None or "\x00" in text:
        return False
    text = text.lstrip("\t\n\x0c\r ")
    prolog = _XML_PROLOG.match(text)
    if prolog is not None:
        return _XHTML_START.match(text, prolog.end()) is not None
    return _HTML_START.match(text) is not None


def declared_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def file_looks_like_html(path: Path) -> bool:
    with open(path, "rb") as f:
        return looks_like_html(f.read(HEAD_BYTES))


def is_html_upload(path: Path, content_type: str) -> bool:
    """For a retained artifact: the declared type must allow HTML, and the bytes must be HTML."""
    if declared_type(content_type) not in ACCEPTED_DECLARED:
        return False
    return file_looks_like_html(path)
