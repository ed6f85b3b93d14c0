"""PDF pages (PyMuPDF), with their printed labels, and OCR where a page shows text it does not hold.

Locators: `page:N` (N counts from 1 in file order); when the file gives the page a label that differs from
N (`/PageLabels`: "iv", "A-3"), `page:N;label=iv`. An image that covers most of a page holding almost no
text of its own (a table or a scan pasted as a picture) is read by OCR as `page:N[;label=L];image=K`; a
page without any text layer is read by OCR whole as `page:N[;label=L]`. OCR'd passages are flagged `ocr`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.assets.extraction import Collector, ExtractionError, escape_field
from services.assets.ocr import Ocr

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
        rect = pymupdf.Rect(info["bbox"]) & page.rect
        if rect.is_empty or abs(rect) / area < _IMAGE_SHARE:
            continue
        if len(page.get_text("text", clip=rect).strip()) < _TEXT_IN_IMAGE:
            regions.append(rect)
    return regions


def _is_blank(page: Any) -> bool:
    # get_image_info also sees inline images (scanners write them), which the page's resources do not list.
    return not page.get_image_info() and not page.get_drawings()


class _Pages:
    def __init__(self, out: Collector, *, labelled: bool):
        limits = out.limits
        # Most files define no page labels; then no page asks for one (a catalog walk per page).
        self.labelled = labelled
        self.out = out
        self.cov = out.coverage
        self.ocr = Ocr(max_pages=limits.ocr_max_pages, seconds=limits.ocr_seconds, dpi=limits.ocr_dpi)
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
            if not self.ocr.can_read():
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
        if not self.ocr.can_read():
            self.not_ocred.append(number)
            self.skipped += 1
            return True
        found = self.ocr.read_page(page)
        if not found.strip():
            self.no_text.append(number)
            return True
        return self.out.add(locator, found, ocr=True)

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


def extract_pdf(path: Path, out: Collector) -> None:
    import pymupdf

    # MuPDF writes its complaints about damaged files to stderr; the notes below carry what matters.
    pymupdf.TOOLS.mupdf_display_errors(False)
    cov = out.coverage
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as exc:
        raise ExtractionError("the PDF is damaged beyond repair and cannot be opened") from exc
    with doc:
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
        for number in range(1, pages + 1):
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
