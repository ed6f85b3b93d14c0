"""The sandbox process on its own: results, the wall-clock deadline, and a parser that dies."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from services.assets.app import limits_of
from services.assets.sandbox import ExtractionFailed, Sandbox
from shared.settings import AssetsSettings


@asynccontextmanager
async def sandbox_of(cpu_seconds: float = 30, wall_seconds: float = 30) -> AsyncIterator[Sandbox]:
    """A sandbox with the memory of the service's default, closed when the block ends."""
    sandbox = Sandbox(
        limits_of(AssetsSettings()), cpu_seconds=cpu_seconds, memory_bytes=1536 * 2**20, wall_seconds=wall_seconds
    )
    try:
        yield sandbox
    finally:
        await sandbox.close()


async def collect(sandbox: Sandbox, path: Path, kind: str) -> tuple[dict, list[tuple[str, str]]]:
    got: list[tuple[str, str]] = []

    async def sink(locator: str, text: str, meta: dict[str, Any]) -> None:
        got.append((locator, text))

    return await sandbox.run(path, kind, sink), got


async def test_passages_stream_in_order_run_after_run(tmp_path: Path) -> None:
    async with sandbox_of() as sandbox:
        path = tmp_path / "a"
        path.write_text("one\n\ntwo\nthree\n")
        for _ in range(2):
            summary, got = await collect(sandbox, path, "text")
            assert got == [("text:l=1-1", "one"), ("text:l=3-4", "two\nthree")]
            assert summary == {"status": "complete", "units_total": 2, "units_extracted": 2, "notes": []}
            # Each file gets a fresh process; the next one is already warming up.
            assert sandbox._spare is not None


async def test_wall_clock_deadline_kills_the_parser(tmp_path: Path) -> None:
    async with sandbox_of(cpu_seconds=60, wall_seconds=0.3) as sandbox:
        path = tmp_path / "big.html"
        path.write_bytes(b"<p>word</p>" * 2_000_000)
        with pytest.raises(ExtractionFailed, match=r"did not finish within 0.3 s"):
            await collect(sandbox, path, "html")


async def test_unparseable_input_is_an_error_not_a_crash(tmp_path: Path) -> None:
    async with sandbox_of() as sandbox:
        path = tmp_path / "x"
        path.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 20)
        with pytest.raises(ExtractionFailed, match="cannot be opened"):
            await collect(sandbox, path, "pdf")
        with pytest.raises(ExtractionFailed, match="not a readable zip"):
            await collect(sandbox, path, "docx")
