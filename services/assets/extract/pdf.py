"""PDF pages (PyMuPDF), with their printed labels, and OCR where a page shows text it does not hold.

Locators: `page:N` (N counts from 1 in file order); when the file gives the page a label that differs from
N (`/PageLabels`: "iv", "A-3"), `page:N;label=iv`. An image that covers most of a page holding almost no
text of its own (a table or a scan pasted as a picture) is read by OCR as `page:N[;label=L];image=K`; a
page without any text layer is read by OCR whole as `page:N[;label=L]`. OCR'd passages are flagged `ocr`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.assets.extract.base import Collector, Emit, ExtractionError, escape_field
from services.assets.extract.ocr import Ocr

# An image region is worth OCR when it covers at least this share of the page...
_IMAGE_SHARE = 0.5
# ...and the text layer inside it holds fewer characters than this (a searchable scan holds its text).
_TEXT_IN_IMAGE = 20


def _count(n: int) -> str:
    return f"{n} page" if n == 1 else f"{n} pages"


def _where(pages: list[int]) -> str:
    return f"page {pages[0]}" if len(pages) == 1 else f"pages {page_ranges(pages)}"


def page_ranges(pages: list[int]) -> str:
    """`[1, 2, 3, 7]` → `1-3, 7`."""
    spans: list[list[int]] = []
    for number in sorted(pages):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _locator(page: Any, number: int, labelled: bool) -> str:
    if not labelled:
        return f"page:{number}"
    try:
        label = page.get_label()
    except Exception:
        label = ""
    if label and label != str(number):
        return f"page:{number};label={escape_field(label)}"
    return f"page:{number}"


def _image_regions(page: Any) -> list[Any]:
    """Large image areas of the page whose text layer is (nearly) empty."""
    import pymupdf

    if not page.get_images(full=False):
        return []  # the cheap look at the page's resources; get_image_info interprets its content
    area = abs(page.rect) or 1.0
    regions = []
    for info in page.get_image_info():
        # PyMuPDF's Rect, Document and TOOLS carry no annotations: their calls here are not untyped calls of ours.
        rect = pymupdf.Rect(info["bbox"]) & page.rect  # type: ignore[no-untyped-call]
        if rect.is_empty or abs(rect) / area < _IMAGE_SHARE:
            continue
        if len(page.get_text("text", clip=rect).strip()) < _TEXT_IN_IMAGE:
            regions.append(rect)
    return regions


def _is_blank(page: Any) -> bool:
    # get_image_info also sees inline images (scanners write them), which the page's resources do not list.
    return not page.get_image_info() and not page.get_drawings()


class NeedsOcr(Exception):
    """A page of a block would need more OCR than the block's share of the file's budget."""


class _Pages:
    def __init__(self, out: Collector, *, labelled: bool, share: tuple[int, float] | None = None):
        limits = out.limits
        # Most files define no page labels; then no page asks for one (a catalog walk per page).
        self.labelled = labelled
        self.out = out
        self.cov = out.coverage
        # A block of a split file (services.assets.splitting) has a share of the file's OCR budget (pages,
        # seconds); a page that needs OCR beyond it ends the block there, for one parser to read on in page order.
        self.in_block = share is not None
        pages, seconds = share if share is not None else (limits.ocr_max_pages, limits.ocr_seconds)
        self.ocr = Ocr(max_pages=pages, seconds=seconds, dpi=limits.ocr_dpi)
        self.unreadable: list[int] = []
        self.blank: list[int] = []
        self.no_text: list[int] = []
        self.not_ocred: list[int] = []
        # Pages without a text layer that OCR did not reach offer nothing: they are not extracted units.
        self.skipped = 0

    def read(self, page: Any, number: int) -> bool:
        """Extract one page; False once the collector is full."""
        text = page.get_text("text")
        locator = _locator(page, number, self.labelled)
        if not text.strip():
            return self._without_text_layer(page, number, locator)
        if not self.out.add(locator, text):
            return False
        for k, region in enumerate(_image_regions(page), start=1):
            if not self._may_ocr():
                self.not_ocred.append(number)
                break
            found = self.ocr.read_page(page, clip=region)
            if found.strip() and not self.out.add(f"{locator};image={k}", found, ocr=True):
                return False
        return True

    def _without_text_layer(self, page: Any, number: int, locator: str) -> bool:
        if _is_blank(page):
            self.blank.append(number)
            return True
        if not self._may_ocr():
            self.not_ocred.append(number)
            self.skipped += 1
            return True
        found = self.ocr.read_page(page)
        if not found.strip():
            self.no_text.append(number)
            return True
        return self.out.add(locator, found, ocr=True)

    def _may_ocr(self) -> bool:
        if self.ocr.can_read():
            return True
        if self.in_block:
            raise NeedsOcr
        return False

    def report(self) -> None:
        cov = self.cov
        if self.ocr.pages:
            cov.notes.append(self.ocr.summary())
        if self.unreadable:
            cov.lose(f"{_count(len(self.unreadable))} could not be read ({_where(self.unreadable)})")
        if self.blank:
            cov.notes.append(f"{_count(len(self.blank))} blank ({_where(self.blank)})")
        if self.no_text:
            cov.lose(
                f"{_count(len(self.no_text))} without a text layer, and OCR found no text there"
                f" ({_where(self.no_text)})"
            )
        if self.not_ocred:
            cov.lose(
                f"{_count(len(self.not_ocred))} without a text layer or with an image of text not read by"
                f" OCR (limit {self.ocr.max_pages} pages or {self.ocr.seconds:g} s per file; {_where(self.not_ocred)})"
            )


def _has_labels(doc: Any) -> bool:
    try:
        return bool(doc.get_page_labels())
    except Exception:
        return True  # a damaged label tree: let each page try, and fail alone


@dataclass
class Seed:
    """Where one parser takes over a file whose first pages others read (services.assets.splitting): the
    state the page loop would have at page `start`, with the OCR the pages before it used."""

    start: int = 1
    passages: int = 0
    chars: int = 0
    cut: int = 0
    extracted: int = 0
    unreadable: list[int] = field(default_factory=list)
    blank: list[int] = field(default_factory=list)
    ocr_pages: int = 0
    ocr_seconds: float = 0.0
    no_text: list[int] = field(default_factory=list)


def _open(path: Path) -> Any:
    import pymupdf

    # MuPDF writes its complaints about damaged files to stderr; the notes below carry what matters.
    pymupdf.TOOLS.mupdf_display_errors(False)  # type: ignore[no-untyped-call]
    try:
        return pymupdf.open(path, filetype="pdf")  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise ExtractionError("the PDF is damaged beyond repair and cannot be opened") from exc


def extract_pdf(path: Path, out: Collector, seed: Seed | None = None) -> None:
    cov = out.coverage
    with _open(path) as doc:
        total = doc.page_count
        cov.units_total = total
        if doc.needs_pass and not doc.authenticate(""):
            cov.lose(f"the file is encrypted; none of its {total} pages could be read")
            return
        if total == 0:
            raise ExtractionError("the PDF has no readable pages")
        pages = min(total, out.limits.max_parts)
        if total > pages:
            cov.lose(f"only the first {pages} of {total} pages were extracted (page limit)")
        reader = _Pages(out, labelled=_has_labels(doc))
        seed = seed or Seed()
        out.passages, out.chars, out.cut = seed.passages, seed.chars, seed.cut
        cov.units_extracted = seed.extracted
        reader.unreadable, reader.blank = list(seed.unreadable), list(seed.blank)
        reader.ocr.pages, reader.ocr.spent, reader.no_text = seed.ocr_pages, seed.ocr_seconds, list(seed.no_text)
        for number in range(seed.start, pages + 1):
            try:
                page = doc[number - 1]
                if not reader.read(page, number):
                    break
            except ExtractionError:
                raise
            except Exception:
                reader.unreadable.append(number)
                continue
            cov.units_extracted += 1
        cov.units_extracted -= reader.skipped
        if doc.is_repaired:
            recovered = [n for n in range(1, pages + 1) if n not in reader.unreadable]
            cov.lose(
                f"the file was damaged and has been repaired: {_count(len(recovered))} recovered"
                f" ({_where(recovered) if recovered else 'none'}); pages or text beyond them may be missing"
            )
        reader.report()


class Part:
    """One parser's share of a split file: blocks of pages, each told with its tally.

    A block ends early (`stop`) at the first page whose outcome depends on what came before it in the file:
    one that needs more OCR than the block's share of the file's OCR budget (the budget is spent in page
    order), one the collector refuses (its limits count the whole file), or one after which MuPDF repaired
    the file. That page and the rest are read again by the parser that takes over with a `Seed`, as one
    parser would read them.
    """

    def __init__(self, path: Path, out: Collector):
        self.doc = _open(path)
        self.out = out
        self.repaired = self.doc.is_repaired
        self.labelled = _has_labels(self.doc)

    def pages(self) -> int | None:
        """Pages to read, or None when the file is not one to split (encrypted, empty)."""
        doc = self.doc
        if (doc.needs_pass and not doc.authenticate("")) or doc.page_count == 0:
            return None
        return int(min(doc.page_count, self.out.limits.max_parts))

    def scanned(self) -> bool:
        """Whether the first page is read by OCR (no text layer, or an image of text): a scan, whose pages
        are worth sharing one at a time however few they are."""
        try:
            page = self.doc[0]
            if not page.get_text("text").strip():
                return not _is_blank(page)
            return bool(_image_regions(page))
        except Exception:
            return False  # the page loop says what is wrong with it

    def block(self, first: int, last: int, emit: Emit, *, ocr: tuple[int, float]) -> dict[str, Any]:
        """Pages `first`..`last` with `ocr` (pages, seconds) of the file's OCR budget."""
        out = self.out
        out.passages = out.chars = out.cut = out.offered = 0
        out.full = False
        reader = _Pages(out, labelled=self.labelled, share=ocr)
        held: list[tuple[str, str, dict[str, Any]]] = []
        out.divert(lambda loc, text, meta: held.append((loc, text, meta)))
        stop = None
        for number in range(first, last + 1):
            mark = (len(held), out.passages, out.chars, out.cut, out.offered, reader.ocr.pages, reader.ocr.spent)
            try:
                page = self.doc[number - 1]
                whole = reader.read(page, number)
            except NeedsOcr:
                whole = False
            except ExtractionError:
                raise
            except Exception:
                reader.unreadable.append(number)
                whole = True
            if not whole or self.doc.is_repaired != self.repaired:
                del held[mark[0] :]
                out.passages, out.chars, out.cut, out.offered, reader.ocr.pages, reader.ocr.spent = mark[1:]
                if number in reader.unreadable:
                    reader.unreadable.remove(number)
                stop = number
                break
        for record in held:
            emit(*record)
        return {
            "stop": stop,
            "passages": out.passages,
            "chars": out.chars,
            "offered": out.offered,
            "cut": out.cut,
            "unreadable": reader.unreadable,
            "blank": [n for n in reader.blank if stop is None or n < stop],
            "no_text": [n for n in reader.no_text if stop is None or n < stop],
            "ocr_pages": reader.ocr.pages,
            "ocr_seconds": reader.ocr.spent,
        }

    def close(self) -> None:
        self.doc.close()
