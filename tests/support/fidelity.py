"""Generated documents for extraction fidelity: scans, page labels, rich and Strict DOCX, encoded HTML.

The real-world corpus that `make test-corpus` reads has no Strict OOXML, no altChunk and no UTF-16 page, so
these are built here, each with known text.
"""

from __future__ import annotations

import io
import zipfile

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_NS = (
    f'xmlns:w="{W}" xmlns:r="{R}"'
    ' xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
    ' xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"'
    ' xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
    ' xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"'
    ' xmlns:v="urn:schemas-microsoft-com:vml"'
)


def _image_of_text(lines: list[str], *, width: float = 500, dpi: int = 150) -> bytes:
    """A PNG of rendered text: what a scanner produces, with no text layer of its own."""
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page(width=width, height=40 + 28 * len(lines))
    for n, line in enumerate(lines):
        page.insert_text((20, 34 + 28 * n), line, fontsize=16)
    return bytes(page.get_pixmap(dpi=dpi).tobytes("png"))


def scanned_pdf(pages: list[list[str]]) -> bytes:
    """Pages that are only an image of their text lines (no text layer)."""
    import pymupdf

    doc = pymupdf.open()
    for lines in pages:
        page = doc.new_page()
        page.insert_image(
            pymupdf.Rect(40, 40, 560, 40 + 520 * (40 + 28 * len(lines)) / 500), stream=_image_of_text(lines)
        )
    return bytes(doc.tobytes())


def pdf_with_table_image(caption: str, table: list[str]) -> bytes:
    """A page with a text layer (a caption) and a table pasted as a picture over most of the page."""
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((40, 40), caption, fontsize=11)
    page.insert_image(pymupdf.Rect(30, 60, 580, 780), stream=_image_of_text(table), keep_proportion=False)
    return bytes(doc.tobytes())


def labelled_pdf(texts: list[str], labels: list[dict[str, object]]) -> bytes:
    """Pages with printed labels, e.g. [{"startpage": 0, "style": "r"}, {"startpage": 2, "prefix": "A-"}]."""
    import pymupdf

    doc = pymupdf.open()
    for text in texts:
        doc.new_page().insert_text((50, 72), text, fontsize=11)
    doc.set_page_labels([{"style": "D", "prefix": "", "firstpagenum": 1, **rule} for rule in labels])
    return bytes(doc.tobytes())


def _p(text: str, extra: str = "") -> str:
    return f"<w:p><w:r><w:t xml:space='preserve'>{text}</w:t></w:r>{extra}</w:p>"


def _text_box(text: str) -> str:
    """A DrawingML text box with its VML fallback, as Word writes it (the same text twice)."""
    box = f"<w:txbxContent>{_p(text)}</w:txbxContent>"
    return (
        "<w:r><mc:AlternateContent><mc:Choice Requires='wps'><w:drawing><wp:anchor><a:graphic><a:graphicData>"
        f"<wps:wsp><wps:txbx>{box}</wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing>"
        f"</mc:Choice><mc:Fallback><w:pict><v:shape><v:textbox>{box}</v:textbox></v:shape></w:pict>"
        "</mc:Fallback></mc:AlternateContent></w:r>"
    )


def rich_docx() -> bytes:
    """Headers (two parts with one text), a footer, a text box, a footnote, an endnote and an HTML altChunk."""
    rt = R + "/"
    body = (
        _p("Body paragraph one mentions the harbour.", "<w:r><w:footnoteReference w:id='1'/></w:r>")
        + _p("Anchor paragraph.", _text_box("Textbox lighthouse words."))
        + "<w:altChunk r:id='rIdChunk'/>"
        + _p("After the chunk.", "<w:r><w:endnoteReference w:id='1'/></w:r>")
        + "<w:p><w:pPr><w:sectPr><w:headerReference w:type='default' r:id='rIdH1'/>"
        "<w:footerReference w:type='default' r:id='rIdF1'/></w:sectPr></w:pPr></w:p>"
        + _p("Second section.")
        + "<w:sectPr><w:headerReference w:type='default' r:id='rIdH2'/>"
        "<w:footerReference w:type='default' r:id='rIdF1'/></w:sectPr>"
    )

    def notes(kind: str, text: str) -> str:
        return (
            f"<w:{kind}s {_NS}><w:{kind} w:type='separator' w:id='-1'><w:p><w:r><w:separator/></w:r></w:p>"
            f"</w:{kind}><w:{kind} w:id='1'>{_p(text)}</w:{kind}></w:{kind}s>"
        )

    parts = {
        "[Content_Types].xml": (
            "<Types xmlns='http://schemas.openxmlformats.org/package/2006/content-types'>"
            "<Default Extension='rels' ContentType='application/vnd.openxmlformats-package.relationships+xml'/>"
            "<Default Extension='xml' ContentType='application/xml'/>"
            "<Default Extension='html' ContentType='text/html'/>"
            "<Override PartName='/word/document.xml' ContentType='application/vnd.openxmlformats-officedocument"
            ".wordprocessingml.document.main+xml'/>"
            + "".join(
                f"<Override PartName='/word/{name}.xml' ContentType='application/vnd.openxmlformats-officedocument"
                f".wordprocessingml.{kind}+xml'/>"
                for name, kind in [
                    ("header1", "header"),
                    ("header2", "header"),
                    ("footer1", "footer"),
                    ("footnotes", "footnotes"),
                    ("endnotes", "endnotes"),
                ]
            )
            + "</Types>"
        ),
        "_rels/.rels": (
            "<Relationships xmlns='http://schemas.openxmlformats.org/package/2006/relationships'>"
            f"<Relationship Id='rId1' Type='{rt}officeDocument' Target='word/document.xml'/></Relationships>"
        ),
        "word/_rels/document.xml.rels": (
            "<Relationships xmlns='http://schemas.openxmlformats.org/package/2006/relationships'>"
            f"<Relationship Id='rIdH1' Type='{rt}header' Target='header1.xml'/>"
            f"<Relationship Id='rIdH2' Type='{rt}header' Target='header2.xml'/>"
            f"<Relationship Id='rIdF1' Type='{rt}footer' Target='footer1.xml'/>"
            f"<Relationship Id='rIdFn' Type='{rt}footnotes' Target='footnotes.xml'/>"
            f"<Relationship Id='rIdEn' Type='{rt}endnotes' Target='endnotes.xml'/>"
            f"<Relationship Id='rIdChunk' Type='{rt}aFChunk' Target='chunk.html'/>"
            "</Relationships>"
        ),
        "word/document.xml": f"<w:document {_NS}><w:body>{body}</w:body></w:document>",
        "word/header1.xml": f"<w:hdr {_NS}>{_p('Quarterly header text')}</w:hdr>",
        "word/header2.xml": f"<w:hdr {_NS}>{_p('Quarterly header text')}</w:hdr>",
        "word/footer1.xml": f"<w:ftr {_NS}>{_p('Confidential footer')}</w:ftr>",
        "word/footnotes.xml": notes("footnote", "A footnote about tides."),
        "word/endnotes.xml": notes("endnote", "An endnote about currents."),
        "word/chunk.html": "<html><body><h1>Imported chunk heading</h1><p>Chunk paragraph about estuaries.</p>"
        "<script>alert('never text')</script></body></html>",
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in parts.items():
            zf.writestr(name, text.encode("utf-8"))
    return out.getvalue()


# Transitional → Strict (ISO/IEC 29500 Strict), the reverse of what the extractor maps.
_TO_STRICT = (
    (W, "http://purl.oclc.org/ooxml/wordprocessingml/main"),
    (R, "http://purl.oclc.org/ooxml/officeDocument/relationships"),
    ("http://schemas.openxmlformats.org/drawingml/2006/main", "http://purl.oclc.org/ooxml/drawingml/main"),
    (
        "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
        "http://purl.oclc.org/ooxml/drawingml/wordprocessingDrawing",
    ),
)


def strict_docx(transitional: bytes) -> bytes:
    """The same package written with Strict OOXML namespaces and relationship types."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(transitional)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for entry in src.infolist():
            data = src.read(entry)
            if entry.filename.endswith((".xml", ".rels")):
                for old, new in _TO_STRICT:
                    data = data.replace(old.encode(), new.encode())
            dst.writestr(entry.filename, data)
    return out.getvalue()


def body_text_scan(pages: list[list[str]], *, dpi: int = 200, fontsize: float = 11) -> bytes:
    """Letter-size pages of body text (11 pt unless told), scanned at `dpi` and pasted whole: no text layer."""
    import pymupdf

    out = pymupdf.open()
    for lines in pages:
        src = pymupdf.open()
        page = src.new_page(width=612, height=792)
        for n, line in enumerate(lines):
            page.insert_text((54, 60 + 20 * fontsize / 11 * n), line, fontsize=fontsize)
        png = page.get_pixmap(dpi=dpi, colorspace="gray").tobytes("png")
        out.new_page(width=612, height=792).insert_image(pymupdf.Rect(0, 0, 612, 792), stream=png)
    return bytes(out.tobytes())
