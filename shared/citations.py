"""How an answer cites what it read: `pub_…@N` (or `@vN`) for a publication version, `source@vN locator` for
a passage. The run's claim check (runhost) and the workbench's links (gateway) read the same forms."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

PUBLICATION_CITE = re.compile(r"(?<![\w@])(pub_[A-Za-z0-9]+)@v?(\d+)\b")
SOURCE_CITE = re.compile(r"(?<![\w@])([A-Za-z0-9][A-Za-z0-9_.\-]{0,199})@v(\d+)\s+")
LOCATOR = re.compile(r"(?:page|docx|xlsx|html|text):[^\s,;)\]]+")


@dataclass(frozen=True)
class Citation:
    """One citation found in a text: where it starts and ends, and what it names."""

    start: int
    end: int
    kind: str  # "publication" or "source"
    id: str
    version: int
    locator: str | None


def source_locator(rest: str, known: list[str]) -> str | None:
    """The locator that starts `rest`: the longest one the run read for that version (they may hold spaces,
    e.g. a DOCX heading path), else one as written; None when nothing there looks like a locator."""
    for loc in sorted(known, key=len, reverse=True):
        if rest.startswith(loc) and not rest[len(loc) : len(loc) + 1].isalnum():
            return loc
    written = LOCATOR.match(rest)
    return written[0].rstrip(":.") if written else None


def find_citations(text: str, known: Mapping[tuple[str, int], list[str]] | None = None) -> Iterator[Citation]:
    """Every citation in `text`, in order; a source named without a locator is cited with none."""
    found = []
    for m in PUBLICATION_CITE.finditer(text):
        found.append(Citation(m.start(), m.end(), "publication", m[1], int(m[2]), None))
    for m in SOURCE_CITE.finditer(text):
        if m[1].startswith("pub_"):
            continue
        version = int(m[2])
        locator = source_locator(text[m.end() :], (known or {}).get((m[1], version), []))
        end = m.end() + len(locator) if locator else m.end(2)
        found.append(Citation(m.start(), end, "source", m[1], version, locator))
    yield from sorted(found, key=lambda c: c.start)
