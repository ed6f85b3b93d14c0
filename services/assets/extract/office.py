"""Office files: the zip container is checked first (bombs, entity declarations), then parsed.

Office files are zip archives of XML. A zip bomb expands a small file into gigabytes and a "billion
laughs" DTD expands entities exponentially, so before any parser sees the file every entry's declared
size, the total and the compression ratio are bounded (Python's zipfile never inflates an entry past its
declared size), and no XML part may declare a DTD: OOXML never needs one. XLSX is read here; DOCX in
`wordprocessing`.
"""

from __future__ import annotations

import re
import zipfile
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from services.assets.extract.base import Collector, ExtractionError, Limits

# Small entries compress well without being dangerous; the ratio is judged on entries above this size.
_RATIO_FLOOR_BYTES = 1024 * 1024
_DTD = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)


def check_zip(path: Path, limits: Limits) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            entries = zf.infolist()
            if len(entries) > limits.max_zip_entries:
                raise ExtractionError(f"the archive has {len(entries)} entries (limit {limits.max_zip_entries})")
            total = 0
            for entry in entries:
                if entry.file_size > limits.max_zip_entry_bytes:
                    raise ExtractionError(
                        f"an entry would expand to {entry.file_size} bytes (limit {limits.max_zip_entry_bytes});"
                        " rejected as a zip bomb"
                    )
                ratio = entry.file_size / max(entry.compress_size, 1)
                if entry.file_size > _RATIO_FLOOR_BYTES and ratio > limits.max_zip_ratio:
                    raise ExtractionError(
                        f"an entry expands {ratio:.0f} times (limit {limits.max_zip_ratio}); rejected as a zip bomb"
                    )
                total += entry.file_size
            if total > limits.max_zip_total_bytes:
                raise ExtractionError(
                    f"the archive would expand to {total} bytes (limit {limits.max_zip_total_bytes});"
                    " rejected as a zip bomb"
                )
            for entry in entries:
                if entry.filename.endswith((".xml", ".rels")):
                    with zf.open(entry) as part:
                        head = part.read(4096)
                    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
                        head = head.decode("utf-16", "ignore").encode()
                    if _DTD.search(head):
                        raise ExtractionError("an XML part declares a DTD or entities; these are not allowed")
    except zipfile.BadZipFile as exc:
        raise ExtractionError("the file is not a readable zip archive") from exc


def _cell_text(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    # Array and data-table formulas are objects; their text is what the cell holds, never a result.
    text = getattr(value, "text", None)
    if isinstance(text, str):
        return text if text.startswith("=") else f"={text}"
    return str(value)


def extract_xlsx(path: Path, out: Collector) -> None:
    """Every non-empty cell, located by sheet and A1 reference; a formula is kept as its text."""
    check_zip(path, out.limits)
    import openpyxl

    cov = out.coverage
    # A file object, not the path: openpyxl judges a path by its extension, and staged files have none.
    source = open(path, "rb")  # closed in the finally below, after the read-only iteration
    try:
        # data_only=False: a formula cell holds its formula, never a cached value that may be stale.
        workbook = openpyxl.load_workbook(source, read_only=True, data_only=False, keep_links=False)
    except Exception as exc:
        source.close()
        raise ExtractionError(f"the XLSX cannot be opened: {type(exc).__name__}") from exc
    try:
        sheets = workbook.worksheets
        if len(sheets) > out.limits.max_parts:
            cov.lose(f"only the first {out.limits.max_parts} of {len(sheets)} sheets were extracted (part limit)")
        for sheet in sheets[: out.limits.max_parts]:
            # The declared dimension may be a lie (a million empty columns); read only the cells present.
            sheet.reset_dimensions()
            for row in sheet.iter_rows():
                for cell in row:
                    value = getattr(cell, "value", None)
                    if value is None:
                        continue
                    text = _cell_text(value)
                    if not text.strip():
                        continue
                    cov.units_total += 1
                    if not out.add(f"xlsx:{sheet.title}!{cell.coordinate}", text):
                        cov.lose("cells after the passage limit were not counted")
                        return
                    cov.units_extracted += 1
    finally:
        workbook.close()
        source.close()
