"""Files generated for tests and benchmarks: real documents, damaged ones and hostile ones."""

from __future__ import annotations

import io
import random
import zipfile

WORDS = (
    "liquidity redemption fund risk asset manager portfolio bond equity cash market stress gate"
    " swing pricing investor outflow maturity collateral margin volatility duration spread"
).split()


def pdf(pages: list[str]) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(40, 40, 560, 800), text, fontsize=9)
    return bytes(doc.tobytes())


def big_pdf(pages: int, *, seed: int = 1, lines: int = 40) -> bytes:
    """A text-heavy PDF; the seed makes different bytes with the same shape."""
    import pymupdf

    rnd = random.Random(seed)
    doc = pymupdf.open()
    for number in range(pages):
        body = "\n".join(" ".join(rnd.choice(WORDS) for _ in range(12)) for _ in range(lines))
        doc.new_page().insert_text((40, 40), f"Page {number + 1} seed {seed}\n{body}", fontsize=8)
    return bytes(doc.tobytes())


def book_pdf(pages: int, *, seed: int = 1, scanned: tuple[int, ...] = ()) -> bytes:
    """A long book: roman-numbered front matter, chapters labelled `C-1`…, every 37th page blank, and
    `scanned` pages (1-based) that are only an image of their text, for OCR."""
    import pymupdf

    from tests.support.fidelity import scanned_pdf

    doc = pymupdf.open(stream=big_pdf(pages, seed=seed, lines=12), filetype="pdf")
    for number in range(pages, 0, -1):
        if number % 37 == 0 or number in scanned:
            doc.delete_page(number - 1)
            if number in scanned:
                lines = [f"Scanned page {number} of the book", "Redemptions were gated that quarter"]
                doc.insert_pdf(pymupdf.open(stream=scanned_pdf([lines]), filetype="pdf"), start_at=number - 1)
            else:
                doc.new_page(number - 1)
    doc.set_page_labels(
        [
            {"startpage": 0, "style": "r", "prefix": "", "firstpagenum": 1},
            {"startpage": 8, "style": "D", "prefix": "C-", "firstpagenum": 1},
        ]
    )
    return bytes(doc.tobytes())


def encrypted_pdf(text: str = "a secret liquidity note") -> bytes:
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((50, 50), text)
    doc.new_page().insert_text((50, 50), text + " again")
    return bytes(doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="user-pw", owner_pw="owner-pw"))


def truncated_pdf() -> bytes:
    whole = big_pdf(6, seed=99)
    return whole[: len(whole) * 2 // 3]


def blank_pdf(pages: int) -> bytes:
    """Pages with nothing on them: a valid file from which no passage can be extracted."""
    import pymupdf

    doc = pymupdf.open()
    for _ in range(pages):
        doc.new_page()
    return bytes(doc.tobytes())


def nested_flate_pdf() -> bytes:
    """One page whose text sits behind two Flate filters, the inner one not Flate at all: MuPDF draws
    nothing from it, so the page offers no passage."""
    import zlib

    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Text no parser will see.")
    xref = page.get_contents()[0]
    doc.update_stream(xref, zlib.compress(b"\x00not a deflate stream" * 20), new=False, compress=False)
    doc.xref_set_key(xref, "Filter", "[/FlateDecode /FlateDecode]")
    return bytes(doc.tobytes())


def docx(blocks: list[tuple[str, str]]) -> bytes:
    """`blocks` of (style, text): style "h1".."h3" for headings, "p" for body text, "table" for a 2x2 table."""
    import docx as python_docx

    document = python_docx.Document()
    for style, text in blocks:
        if style.startswith("h"):
            document.add_heading(text, level=int(style[1:]))
        elif style == "table":
            table = document.add_table(rows=2, cols=2)
            for i, cell in enumerate(c for row in table.rows for c in row.cells):
                cell.text = f"{text} {i + 1}"
        else:
            document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def xlsx(sheets: dict[str, dict[str, object]]) -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    first = True
    for title, cells in sheets.items():
        sheet = workbook.active if first else workbook.create_sheet()
        assert sheet is not None
        sheet.title = title
        first = False
        for ref, value in cells.items():
            sheet[ref] = value
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def zip_bomb_docx(expanded_bytes: int = 300 * 1024 * 1024) -> bytes:
    """A DOCX-shaped zip whose document part inflates to `expanded_bytes` from a few hundred KiB."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("[Content_Types].xml", _CONTENT_TYPES)
        zf.writestr("_rels/.rels", _RELS)
        with zf.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(b'<?xml version="1.0"?><w:document xmlns:w="urn:w"><w:body><w:p><w:r><w:t>')
            chunk = b"A" * (1024 * 1024)
            for _ in range(expanded_bytes // len(chunk)):
                part.write(chunk)
            part.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return out.getvalue()


def billion_laughs_xlsx() -> bytes:
    """A real workbook whose first sheet declares exponentially nested entities (a billion "lol"s)."""
    entities = ['<!ENTITY lol "lol">'] + [
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)
    ]
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE worksheet [' + "".join(entities) + "]>"
        '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
        '<row r="1"><c r="A1" t="inlineStr"><is><t>&lol9;</t></is></c></row></sheetData></worksheet>'
    ).encode()
    source = io.BytesIO(xlsx({"Data": {"A1": "hello"}}))
    out = io.BytesIO()
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for entry in zin.infolist():
            data = zin.read(entry)
            if entry.filename == "xl/worksheets/sheet1.xml":
                data = bomb
            zout.writestr(entry, data)
    return out.getvalue()


def random_bytes(size: int = 4096, seed: int = 7) -> bytes:
    data = bytes(random.Random(seed).randrange(256) for _ in range(size))
    # Make sure no sniffing rule could ever match (no PDF marker, no zip or BOM prefix).
    return b"\x00\xff" + data.replace(b"%PDF-", b"xxxxx")


_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml"'
    ' ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    "</Types>"
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"'
    ' Target="word/document.xml"/></Relationships>'
)


# The new fund announcement of the running example (README): two pages, each a dated fact.
# The running example's question (README.md), asked of a workspace with an earlier report and the announcement.
QUESTION = "Which earlier judgements about Fund X redemption liquidity still hold after the announcement?"

ANNOUNCEMENT = [
    "Fund X announcement, 20 November 2026. The board introduces redemption gates of 10 percent per quarter.",
    "Liquidity update. Daily redemptions are suspended until the illiquid real estate holdings are sold.",
]
