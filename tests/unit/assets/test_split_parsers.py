"""A split PDF whose parser dies mid-file: the pages it had not answered are read again by one parser, and
the file reads as one parser reads it (services.assets.splitting, real confined parsers)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from services.assets.app import limits_of
from services.assets.queueing import FairSlots
from services.assets.sandbox import Sandbox
from services.assets.splitting import Split, extract_file
from shared.settings import AssetsSettings
from tests.support.documents import big_pdf
from tests.support.probe import probe_until

Read = tuple[dict[str, Any], list[tuple[str, str]]]


def sandbox(split_pages: int) -> Sandbox:
    return Sandbox(
        limits_of(AssetsSettings()),
        cpu_seconds=60,
        memory_bytes=1536 * 2**20,
        wall_seconds=120,
        split_pages=split_pages,
        split_width=2,
    )


async def read_with(box: Sandbox, path: Path, slots: FairSlots, *, kill: int | None = None) -> Read:
    """Read `path`; with `kill`, that share's parser (0: the file's own) is killed once both have answered."""
    got: list[tuple[str, str]] = []

    async def sink(locator: str, text: str, meta: dict[str, Any]) -> None:
        got.append((locator, text))

    async with slots.slot("scope"):
        split = Split(box, path, sink, slots)
        running = asyncio.create_task(split.run()) if box.split_pages else None
        if running is None:
            return await extract_file(box, path, "pdf", sink, slots), got
        if kill is not None:

            async def both_answered() -> bool:
                return len(split.shares) >= 2 and all(s.answered for s in split.shares[:2])

            await probe_until(both_answered, timeout=60, interval=0.001)
            split.shares[kill].stream.parser.proc.kill()
            result = await running
            # The killed parser's unanswered blocks were read again: from its first one on, by one parser
            # (a new one when the file's own parser was the one killed).
            assert split.cut_at is not None and len(split.shares) == (3 if kill == 0 else 2)
            return result, got
        return await running, got


@pytest.mark.parametrize("kill", [0, 1], ids=["the file's own parser", "a helper"])
async def test_a_parser_that_dies_mid_file_costs_a_reread_not_the_file(tmp_path: Path, kill: int) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(big_pdf(2000, seed=5, lines=4))
    one, shared = sandbox(0), sandbox(64)
    slots = FairSlots(2, per_scope=4)
    try:
        shared.start()
        await read_with(shared, tmp_path / "long.pdf", slots)  # the helpers warm after a first file

        async def warm() -> bool:
            return shared.helpers_ready() >= 1

        await probe_until(warm, timeout=60)
        expected = await read_with(one, path, slots)
        assert await read_with(shared, path, slots, kill=kill) == expected
        assert expected[0]["units_extracted"] == 2000 and len(expected[1]) == 2000
    finally:
        await one.close()
        await shared.close()


async def test_a_file_of_another_scope_gets_the_borrowed_slot_before_the_long_file_ends(tmp_path: Path) -> None:
    path = tmp_path / "long.pdf"
    path.write_bytes(big_pdf(2000, seed=6, lines=4))
    shared = sandbox(64)
    slots = FairSlots(2, per_scope=4)
    try:
        shared.start()
        await read_with(shared, path, slots)

        async def warm() -> bool:
            return shared.helpers_ready() >= 1

        await probe_until(warm, timeout=60)
        got: list[tuple[str, str]] = []

        async def sink(locator: str, text: str, meta: dict[str, Any]) -> None:
            got.append((locator, text))

        async with slots.slot("long"):
            split = Split(shared, path, sink, slots)
            running = asyncio.create_task(split.run())

            async def helped() -> bool:
                return len(split.shares) >= 2 and split.shares[1].answered > 0

            await probe_until(helped, timeout=60, interval=0.001)
            # Both slots are taken (the file's own and the borrowed one): another scope's file waits, and the
            # helper gives its slot back at its next block boundary, long before the file's 125 blocks end.
            async with slots.slot("other"):
                assert not running.done()
            coverage = await running
        assert coverage["units_extracted"] == 2000 and len(got) == 2000
        assert not split.shares[1].alive and split.shares[1].answered < len(split.blocks)
    finally:
        await shared.close()


async def test_a_block_is_given_a_share_of_the_ocr_budget_and_may_not_claim_more(tmp_path: Path) -> None:
    """The service hands each block a share of the file's OCR budget that no earlier block holds, and refuses a
    tally that says it spent pages beyond its share (the parser is not believed; the file is read on by one)."""

    async def sink(locator: str, text: str, meta: dict[str, Any]) -> None:
        raise AssertionError("no passage is handed on here")

    split = Split(sandbox(64), tmp_path / "scan.pdf", sink, FairSlots(2, per_scope=4))
    budget = split.limits.ocr_max_pages, split.limits.ocr_seconds
    assert split._ocr_share(1, 1) == (1, budget[1] / budget[0])
    assert split._ocr_share(1, 16) == (16, budget[1] * 16 / budget[0])
    split.ocr_pages, split.ocr_seconds = budget[0] - 1, budget[1] / 2  # spent or held by earlier blocks
    assert split._ocr_share(1, 16) == (1, budget[1] / 2)
    split.ocr_pages = budget[0]
    assert split._ocr_share(1, 1) == (0, 0.0)
    split.ocr_pages, split.ocr_seconds = 0, budget[1]
    assert split._ocr_share(1, 1) == (0, 0.0)

    tally = {
        **{"stop": None, "passages": 1, "chars": 40, "offered": 40, "cut": 0, "cpu": 2.5},
        **{"ocr_pages": 1, "ocr_seconds": 2.0, "unreadable": [], "blank": [], "no_text": []},
    }
    assert split._tally(tally, 3, 3, 1, (1, 3.0)) == tally
    assert split._tally(tally, 3, 3, 1, (0, 0.0)) is None
    assert split._tally({**tally, "ocr_pages": -1}, 3, 3, 1, (1, 3.0)) is None
    assert split._tally({**tally, "ocr_seconds": "2"}, 3, 3, 1, (1, 3.0)) is None
    assert split._tally({**tally, "no_text": [4]}, 3, 3, 1, (1, 3.0)) is None
