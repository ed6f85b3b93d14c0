"""DOCX: every story a reader sees, in document order, located; what is not read is said in the notes.

python-docx opens the package (parts, relationships, styles); the text is read from the XML directly,
because python-docx's paragraph text leaves out text boxes, equations and content controls, and it has no
headers-once, footnotes or `altChunk`. Locators:
- body paragraphs `docx:h=<heading path>;p=N` (N counts every body paragraph, table cells included);
- a text box anchored in paragraph N: `docx:h=...;p=N;box=K` (K counts the box paragraphs of that anchor);
- an `altChunk` (an HTML part imported by Word) at its place: `docx:h=...;chunk=K;s=N` (HTML segments);
- headers and footers, each distinct text once: `docx:header=K;p=N`, `docx:footer=K;p=N`;
- footnotes and endnotes: `docx:footnote=<id>;p=N`, `docx:endnote=<id>;p=N`.
A Strict OOXML file (ISO 29500 Strict namespaces) is mapped to the transitional namespaces first.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from services.assets.extract import webpage
from services.assets.extract.base import Collector, ExtractionError, escape_field
from services.assets.extract.office import check_zip

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_TEXT = frozenset({f"{_W}t", f"{_M}t"})
_TABS = frozenset({f"{_W}tab", f"{_W}ptab"})
_BREAKS = frozenset({f"{_W}br", f"{_W}cr"})
# Never the paragraph's own text: a text box is its own story, a Fallback repeats its Choice, ruby text
# (w:rt) is a pronunciation guide over the base text, and properties hold no text.
_NOT_OWN = frozenset({f"{_W}txbxContent", _FALLBACK, f"{_W}rt", f"{_W}pPr", f"{_W}rPr", f"{_W}instrText"})
_SKIP_BLOCK = frozenset({f"{_W}sectPr", f"{_W}tblPr", f"{_W}tblGrid", f"{_W}trPr", f"{_W}tcPr", f"{_W}sdtPr"})
_HEADING = re.compile(r"Heading (\d)")
_RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
# ISO/IEC 29500 Strict → Transitional. The relationships namespace is also the prefix of every
# relationship type, so one replacement maps both.
_STRICT = (
    (
        b"http://purl.oclc.org/ooxml/wordprocessingml/main",
        b"http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    ),
    (b"http://purl.oclc.org/ooxml/officeDocument/relationships", _RT.rstrip("/").encode()),
    (b"http://purl.oclc.org/ooxml/officeDocument/math", b"http://schemas.openxmlformats.org/officeDocument/2006/math"),
    (b"http://purl.oclc.org/ooxml/drawingml/main", b"http://schemas.openxmlformats.org/drawingml/2006/main"),
    (
        b"http://purl.oclc.org/ooxml/drawingml/wordprocessingDrawing",
        b"http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
    ),
    (b"http://purl.oclc.org/ooxml/drawingml/picture", b"http://schemas.openxmlformats.org/drawingml/2006/picture"),
    (b"http://purl.oclc.org/ooxml/drawingml/chart", b"http://schemas.openxmlformats.org/drawingml/2006/chart"),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/sharedTypes",
        b"http://schemas.openxmlformats.org/officeDocument/2006/sharedTypes",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/extendedProperties",
        b"http://schemas.openxmlformats.org/officeDocument/2006/extended-properties",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/customProperties",
        b"http://schemas.openxmlformats.org/officeDocument/2006/custom-properties",
    ),
    (
        b"http://purl.oclc.org/ooxml/officeDocument/docPropsVTypes",
        b"http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes",
    ),
)


def own_text(p: Any) -> str:
    """The text of one paragraph element, without the text boxes anchored in it."""
    parts: list[str] = []

    def walk(element: Any) -> None:
        for child in element:
            tag = child.tag
            if not isinstance(tag, str) or tag in _NOT_OWN:
                continue
            if tag in _TEXT:
                parts.append(child.text or "")
            elif tag in _TABS:
                parts.append("\t")
            elif tag in _BREAKS:
                parts.append("\n")
            elif tag == f"{_W}noBreakHyphen":
                parts.append("-")
            else:
                walk(child)

    walk(p)
    return "".join(parts)


def _visible(element: Any) -> bool:
    return not any(a.tag == _FALLBACK for a in element.iterancestors())


def _boxes(p: Any) -> Iterator[str]:
    """Paragraph texts of the text boxes anchored in `p` (the Choice of each, never its Fallback copy)."""
    for box in p.iter(f"{_W}txbxContent"):
        if _visible(box):
            for inner in box.iter(f"{_W}p"):
                yield own_text(inner)


def is_strict(path: Path) -> bool:
    with zipfile.ZipFile(path) as zf:
        try:
            rels = zf.read("_rels/.rels")
        except KeyError:
            return False
    return b"http://purl.oclc.org/ooxml/" in rels


def transitional_copy(path: Path) -> bytes:
    """The package with Strict namespaces mapped to transitional ones (sizes were bounded by check_zip)."""
    out = io.BytesIO()
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for entry in src.infolist():
            data = src.read(entry)
            if entry.filename.endswith((".xml", ".rels")):
                for strict, transitional in _STRICT:
                    data = data.replace(strict, transitional)
            dst.writestr(entry.filename, data)
    return out.getvalue()


def open_document(path: Path, out: Collector) -> Any:
    import docx

    strict = is_strict(path)
    try:
        if strict:
            document = docx.Document(io.BytesIO(transitional_copy(path)))
            out.coverage.notes.append("Strict OOXML: read after mapping its namespaces to transitional ones")
            return document
        return docx.Document(str(path))
    except Exception as exc:
        raise ExtractionError(f"the DOCX cannot be opened: {type(exc).__name__}") from exc


class _Body:
    """The walk over the main story in document order, with the heading path of each paragraph."""

    def __init__(self, document: Any, out: Collector):
        self.document = document
        self.out = out
        self.cov = out.coverage
        self.styles = _style_names(document)
        self.headings: list[tuple[int, str]] = []
        self.number = 0
        self.chunks = 0

    def path(self) -> str:
        return "/".join(h for _, h in self.headings)

    def add(self, locator: str, text: str) -> None:
        if not text.strip():
            return
        self.cov.units_total += 1
        if self.out.add(locator, text):
            self.cov.units_extracted += 1

    def walk(self, element: Any) -> None:
        for child in element:
            tag = child.tag
            if not isinstance(tag, str) or tag in _SKIP_BLOCK or tag == _FALLBACK:
                continue
            if tag == f"{_W}p":
                self.paragraph(child)
            elif tag == f"{_W}altChunk":
                self.alt_chunk(child)
            else:
                # Tables, rows, cells, content controls, custom XML: containers of blocks.
                self.walk(child)

    def paragraph(self, p: Any) -> None:
        self.number += 1
        text = own_text(p)
        if text.strip():
            level = self.level(p)
            if level is not None:
                while self.headings and self.headings[-1][0] >= level:
                    self.headings.pop()
                self.headings.append((level, escape_field(text)))
            self.add(f"docx:h={self.path()};p={self.number}", text)
        for k, box in enumerate(_boxes(p), start=1):
            self.add(f"docx:h={self.path()};p={self.number};box={k}", box)

    def level(self, p: Any) -> int | None:
        style = p.find(f"{_W}pPr/{_W}pStyle")
        name = self.styles.get(style.get(f"{_W}val", "") if style is not None else "", "")
        if name == "Title":
            return 0
        match = _HEADING.fullmatch(name)
        return int(match.group(1)) if match else None

    def alt_chunk(self, element: Any) -> None:

        self.chunks += 1
        part = self.document.part.related_parts.get(element.get(_R_ID, ""))
        if part is None:
            self.cov.lose(f"imported part {self.chunks} (altChunk) is missing from the package")
            return
        content_type = str(getattr(part, "content_type", ""))
        if "html" not in content_type:
            self.cov.lose(f"imported part {self.chunks} ({content_type or 'unknown type'}) was not read")
            return
        text, note = webpage.decode_html(part.blob)
        if note is not None:
            self.cov.notes.append(f"imported part {self.chunks}: {note}")
        for number, segment in enumerate(webpage.text_segments(text), start=1):
            self.add(f"docx:h={self.path()};chunk={self.chunks};s={number}", segment)


def _style_names(document: Any) -> dict[str, str]:
    names: dict[str, str] = {}
    try:
        for style in document.styles:
            names[style.style_id or ""] = style.name or ""
    except (KeyError, ValueError, AttributeError):
        return names
    return names


def _stories(document: Any, reltype: str) -> list[Any]:
    """Root elements of the related parts of one type, in the order the document refers to them."""
    rels = document.part.rels
    ids = [e.get(_R_ID, "") for e in document.element.iter(f"{_W}{reltype}Reference")]
    ids += sorted(r for r, rel in rels.items() if rel.reltype == _RT + reltype and r not in ids)
    roots = []
    for rid in dict.fromkeys(ids):
        rel = rels.get(rid)
        if rel is None or rel.is_external or rel.reltype != _RT + reltype:
            continue
        roots.append(_root(rel.target_part))
    return roots


def _root(part: Any) -> Any:
    element = getattr(part, "element", None)
    if element is not None:
        return element
    from docx.oxml.parser import parse_xml

    return parse_xml(part.blob)


def _paragraph_texts(root: Any) -> list[str]:
    return [own_text(p) for p in root.iter(f"{_W}p") if _visible(p)]


def _headers_and_footers(document: Any, body: _Body) -> None:
    for kind in ("header", "footer"):
        seen: set[str] = set()
        for root in _stories(document, kind):
            texts = _paragraph_texts(root)
            joined = "\n".join(t.strip() for t in texts if t.strip())
            if not joined or joined in seen:
                continue
            seen.add(joined)
            for n, text in enumerate(texts, start=1):
                body.add(f"docx:{kind}={len(seen)};p={n}", text)


def _notes(document: Any, body: _Body) -> None:
    for kind in ("footnote", "endnote"):
        for root in _stories(document, f"{kind}s"):
            for note in root.iter(f"{_W}{kind}"):
                if note.get(f"{_W}type") not in (None, "normal"):
                    continue  # separators and continuation notices
                for n, text in enumerate(_paragraph_texts(note), start=1):
                    body.add(f"docx:{kind}={note.get(f'{_W}id', '')};p={n}", text)


def _unread(document: Any, body: _Body) -> None:
    root = document.element
    counts = {
        "embedded objects": sum(1 for _ in root.iter(f"{_W}object")),
        "sub-documents (external files)": sum(1 for _ in root.iter(f"{_W}subDoc")),
    }
    comments = [r for r in document.part.rels.values() if r.reltype == _RT + "comments"]
    if comments:
        counts["comments"] = sum(1 for _ in _root(comments[0].target_part).iter(f"{_W}comment"))
    for what, count in counts.items():
        if count:
            body.cov.lose(f"{what} not read: {count}")


def extract_docx(path: Path, out: Collector) -> None:

    check_zip(path, out.limits)
    document = open_document(path, out)
    body = _Body(document, out)
    body.walk(document.element.body)
    _headers_and_footers(document, body)
    _notes(document, body)
    _unread(document, body)
