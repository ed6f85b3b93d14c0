"""Plain text: blocks of lines, each located by its line range."""

from __future__ import annotations

from pathlib import Path

from services.assets.extract.base import Collector

TEXT_LINES_PER_PASSAGE = 40
TEXT_CHARS_PER_PASSAGE = 2000


def extract_text(path: Path, out: Collector) -> None:
    """Blocks of lines split at blank lines (and at a size), located by their 1-based line range."""
    cov = out.coverage
    raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        cov.lose("some bytes are not valid UTF-8 and were replaced")
    block: list[str] = []
    start = 0

    def flush(end: int) -> None:
        nonlocal block
        if any(line.strip() for line in block):
            cov.units_total += 1
            if out.add(f"text:l={start}-{end}", "\n".join(block)):
                cov.units_extracted += 1
        block = []

    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            flush(number - 1)
            continue
        if not block:
            start = number
        block.append(line)
        if len(block) >= TEXT_LINES_PER_PASSAGE or sum(len(x) for x in block) >= TEXT_CHARS_PER_PASSAGE:
            flush(number)
    flush(start + len(block) - 1)
