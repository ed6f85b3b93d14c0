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

from services.assets.extract.base import Collector
from shared.sniff import bom_encoding

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
_XML_ENCODING = re.compile(rb"""\s*<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
# Detection reads a bounded prefix: enough for any statistical verdict, cheap on a 50 MB page.
_DETECT_BYTES = 256 * 1024
_LATIN_FAMILY = frozenset({"cp1250", "cp1252", "latin_1", "iso8859_15", "iso8859_2", "cp850", "mac_roman", "cp1254"})


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


def _declared_charset(raw: bytes) -> str | None:
    match = _CHARSET.search(raw[:4096]) or _XML_ENCODING.match(raw[:200])
    if match is None:
        return None
    try:
        return codecs.lookup(match.group(1).decode("ascii")).name
    except LookupError:
        return None


def _detected_charset(raw: bytes) -> str:
    import charset_normalizer

    best = charset_normalizer.from_bytes(raw[:_DETECT_BYTES]).best()
    encoding = best.encoding if best is not None else "cp1252"
    # The detector cannot tell the Latin single-byte code pages apart on a few accented letters; WHATWG
    # makes windows-1252 the default for undeclared Western pages, so it wins among them.
    return "cp1252" if encoding in _LATIN_FAMILY else encoding


def decode_html(raw: bytes) -> tuple[str, str | None]:
    """The text, and a note when the bytes contradicted their declared charset (None otherwise)."""
    bom = bom_encoding(raw)
    if bom is not None:
        return raw[bom[1] :].decode(bom[0], "replace"), None
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        pass
    declared = _declared_charset(raw)
    if declared is not None and declared != "utf-8":
        try:
            return raw.decode(declared), None
        except UnicodeDecodeError:
            pass
    detected = _detected_charset(raw)
    text = raw.decode(detected, "replace")
    if declared is None:
        return text, None
    return text, f"the page declares charset {declared} but its bytes are not; decoded as {detected} (detected)"


def text_segments(text: str) -> list[str]:
    parser = _TextOnly()
    parser.feed(text)
    parser.close()
    parser._break()
    return parser.segments


def extract_html(path: Path, out: Collector) -> None:
    cov = out.coverage
    text, note = decode_html(path.read_bytes())
    if note is not None:
        cov.notes.append(note)
    for number, segment in enumerate(text_segments(text), start=1):
        cov.units_total += 1
        if out.add(f"html:s={number}", segment):
            cov.units_extracted += 1
