"""Is an uploaded file HTML? Decided from its first bytes, not from the type its sender declared.

The patterns are those of the WHATWG MIME sniffing standard ("rules for identifying an unknown MIME
type"), plus a few common document-level tags that generated reports start with.
"""

from __future__ import annotations

from pathlib import Path

HEAD_BYTES = 1024
# Declared types that an HTML upload may carry; the bytes must still look like HTML.
ACCEPTED_DECLARED = frozenset({"text/html", "application/xhtml+xml", "application/octet-stream", ""})
_TAGS = (
    b"!doctype html",
    b"html",
    b"head",
    b"script",
    b"iframe",
    b"h1",
    b"div",
    b"font",
    b"table",
    b"a",
    b"style",
    b"title",
    b"b",
    b"body",
    b"br",
    b"p",
    b"meta",
    b"main",
    b"article",
    b"section",
    b"header",
)
_WHITESPACE = b"\t\n\x0c\r "
_TAG_END = b" >\t\n\r\x0c/"


def looks_like_html(head: bytes) -> bool:
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if b"\x00" in head:
        return False  # binary, or UTF-16/32, which a browser would not sniff as HTML either
    text = head.lstrip(_WHITESPACE).lower()
    if text.startswith(b"<!--"):
        return True
    for tag in _TAGS:
        prefix = b"<" + tag
        if text.startswith(prefix) and len(text) > len(prefix) and text[len(prefix)] in _TAG_END:
            return True
    return False


def declared_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def is_html_upload(path: Path, content_type: str) -> bool:
    if declared_type(content_type) not in ACCEPTED_DECLARED:
        return False
    with open(path, "rb") as f:
        return looks_like_html(f.read(HEAD_BYTES))
