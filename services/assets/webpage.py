"""HTML as sanitized static text: what a reader sees, split into segments located by `html:s=N`.

Only text nodes survive. Every attribute (event handlers, `javascript:` links, `srcdoc`) is dropped with
its tag, and the whole content of scripts, styles and other active or embedded elements is skipped, so no
markup or code reaches a passage. Links are not followed: a URL in a document grants nothing.
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser
from pathlib import Path

from services.assets.extraction import Collector

# Elements whose content is code, styling, or a nested document: never text for a reader.
SKIPPED = frozenset(
    {"script", "style", "noscript", "template", "iframe", "object", "embed", "svg", "math", "canvas", "frameset"}
    | {"frame", "applet", "audio", "video", "select", "button", "textarea"}
)
# Elements that start a new segment.
BLOCKS = frozenset(
    {"p", "div", "section", "article", "aside", "header", "footer", "main", "nav", "blockquote", "pre"}
    | {"h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd", "tr", "td", "th", "caption", "figcaption"}
    | {"table", "ul", "ol", "dl", "form", "fieldset", "legend", "address", "hr", "br", "title", "body"}
)
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


class _TextOnly(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.segments: list[str] = []
        self._current: list[str] = []
        self._skip: list[str] = []

    def _break(self) -> None:
        text = " ".join("".join(self._current).split())
        if text:
            self.segments.append(text)
        self._current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip:
            if tag in SKIPPED and tag not in VOID:
                self._skip.append(tag)
            return
        if tag in SKIPPED:
            if tag not in VOID:
                self._skip.append(tag)
            return
        if tag in BLOCKS:
            self._break()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self._skip and tag in BLOCKS:
            self._break()

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if tag in self._skip:
                # Close the innermost matching element and anything left open inside it.
                while self._skip and self._skip.pop() != tag:
                    pass
            return
        if tag in BLOCKS:
            self._break()

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._current.append(data)

    # Comments, processing instructions and declarations are not content.
    def handle_comment(self, data: str) -> None:
        return

    def unknown_decl(self, data: str) -> None:
        return


def decode_html(raw: bytes) -> str:
    if raw.startswith(codecs.BOM_UTF8):
        return raw[3:].decode("utf-8", "replace")
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return raw.decode("utf-16", "replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    match = _CHARSET.search(raw[:4096])
    encoding = "cp1252"
    if match:
        try:
            encoding = codecs.lookup(match.group(1).decode("ascii")).name
        except LookupError:
            pass
    return raw.decode(encoding, "replace")


def sanitized_segments(raw: bytes) -> list[str]:
    parser = _TextOnly()
    parser.feed(decode_html(raw))
    parser.close()
    parser._break()
    return parser.segments


def extract_html(path: Path, out: Collector) -> None:
    cov = out.coverage
    for number, segment in enumerate(sanitized_segments(path.read_bytes()), start=1):
        cov.units_total += 1
        if out.add(f"html:s={number}", segment):
            cov.units_extracted += 1
