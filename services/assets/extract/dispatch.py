"""One file through the extractor of its kind (the formats' modules beside this one)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.assets.extract import office, pdf, text, webpage, wordprocessing
from services.assets.extract.base import Collector, Coverage, Emit, ExtractionError, Limits, failure


def extract(path: Path, kind: str, limits: Limits, emit: Emit, *, seed: Any = None) -> dict[str, Any]:
    """Run the extractor of `kind`; returns the coverage summary or raises ExtractionError.

    `seed` (a `pdf.Seed`) takes a PDF over at a page that other parsers read up to."""
    coverage = Coverage()
    out = Collector(limits, coverage, emit)
    extractors: dict[str, Callable[[Path, Collector], None]] = {
        "pdf": pdf.extract_pdf,
        "docx": wordprocessing.extract_docx,
        "xlsx": office.extract_xlsx,
        "html": webpage.extract_html,
        "text": text.extract_text,
    }
    if kind not in extractors:
        raise ExtractionError(f"no extractor for {kind!r}")
    try:
        if seed is not None and kind == "pdf":
            pdf.extract_pdf(path, out, seed)
        else:
            extractors[kind](path, out)
    except ExtractionError:
        raise
    except Exception as exc:
        raise failure(kind, exc) from exc
    out.finish()
    return coverage.summary()
