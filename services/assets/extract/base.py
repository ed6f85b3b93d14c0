"""What every format's extractor shares: passages with locators from one file, bounded. This code runs
only inside the sandbox process.

Each format yields `(locator, text)` passages into a `Collector`, which enforces the passage count, the
passage size and the total text, and keeps the coverage honest: every loss becomes a note and makes the
extraction `partial`. A file that cannot be read at all raises `ExtractionError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ExtractionError(Exception):
    """The file cannot be extracted. The message is shown to users, so it never names a path."""


@dataclass(frozen=True)
class Limits:
    """The bounds of one extraction: the settings of the same names (shared.settings.AssetsSettings)."""

    max_parts: int
    max_passages: int
    max_passage_chars: int
    max_text_chars: int
    max_zip_entries: int
    max_zip_entry_bytes: int
    max_zip_total_bytes: int
    max_zip_ratio: int
    # OCR of pages without a text layer: at most this many pages and this much time per file.
    ocr_max_pages: int
    ocr_seconds: float
    ocr_dpi: int


@dataclass
class Coverage:
    units_total: int = 0
    units_extracted: int = 0
    notes: list[str] = field(default_factory=list)
    partial: bool = False

    def lose(self, note: str) -> None:
        """Something the file holds could not be offered: say what, and mark the extraction partial."""
        self.notes.append(note)
        self.partial = True

    def summary(self) -> dict[str, Any]:
        return {
            "status": "partial" if self.partial else "complete",
            "units_total": self.units_total,
            "units_extracted": self.units_extracted,
            "notes": self.notes,
        }


def escape_field(value: str) -> str:
    """A value inside a locator: `;` separates fields and `/` heading levels, so both (and `%`) are encoded."""
    text = " ".join(value.split())
    return text.replace("%", "%25").replace(";", "%3B").replace("/", "%2F")


def clean_text(text: str) -> str:
    # PostgreSQL text cannot hold NUL, and lone surrogates cannot be encoded; neither is content.
    text = text.replace("\x00", "")
    return text.encode("utf-8", "replace").decode("utf-8").strip()


# One passage: its locator, its text, and what the index needs to know from the parser ({"ocr": bool}).
Emit = Callable[[str, str, dict[str, Any]], None]


def failure(kind: str, exc: Exception) -> ExtractionError:
    """What a parser says when it fails unexpectedly (never a path or a trace)."""
    if isinstance(exc, MemoryError):
        return ExtractionError("the parser ran out of its memory limit")
    return ExtractionError(f"the {kind} parser failed: {type(exc).__name__}")


class Collector:
    def __init__(self, limits: Limits, coverage: Coverage, emit: Emit):
        self.limits = limits
        self.coverage = coverage
        self._emit = emit
        self.passages = 0
        self.chars = 0
        self.cut = 0
        # Characters offered before any passage was cut: what the next add's total check can count on.
        self.offered = 0
        self.full = False

    def add(self, locator: str, text: str, *, ocr: bool = False) -> bool:
        """Store one passage; False once a limit is reached (the unit is then not extracted)."""
        if self.full:
            return False
        text = clean_text(text)
        if not text:
            return True
        if self.passages >= self.limits.max_passages or self.chars + len(text) > self.limits.max_text_chars:
            self.full = True
            self.coverage.lose(
                f"the limit of {self.limits.max_passages} passages or {self.limits.max_text_chars} characters"
                " was reached; the rest of the file was not extracted"
            )
            return False
        self.offered += len(text)
        if len(text) > self.limits.max_passage_chars:
            text = text[: self.limits.max_passage_chars]
            self.cut += 1
        self.passages += 1
        self.chars += len(text)
        self._emit(locator, text, {"ocr": ocr})
        return True

    def divert(self, emit: Emit) -> None:
        """Send the passages elsewhere from now on (a split part holds a page's passages until it is whole)."""
        self._emit = emit

    def finish(self) -> None:
        if self.cut:
            self.coverage.lose(f"{self.cut} passages were cut at {self.limits.max_passage_chars} characters")
