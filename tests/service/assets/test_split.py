"""A long PDF read by several parsers at once gives what one parser gives: the same passages, in the same
order, with the same locators and OCR flags, and the same coverage (services.assets.splitting)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from prometheus_client import REGISTRY

from services.assets.app import create_app
from shared.blobs import Blobs
from shared.bus import BusClient
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support import documents
from tests.support.fidelity import scanned_pdf
from tests.support.probe import probe_until
from tests.support.service import running

Passages = list[tuple[str, str, bool]]
Outcome = tuple[Passages, dict[str, Any]]
Uploaded = tuple[dict[str, Any], Passages, float]


def helpers_so_far() -> float:
    return REGISTRY.get_sample_value("dossier_extraction_helper_parsers_total") or 0.0


async def upload(make_settings: Any, bus: BusClient, data: bytes, *, split: bool, **env: str) -> Uploaded:
    """Upload `data` to an assets service that splits long PDFs or never does: the version, its passages,
    and how many helper parsers read blocks of it."""
    settings = make_settings(DOSSIER_EXTRACT_SPLIT_PAGES="64" if split else "0", **env)
    runtime = create_app(settings)
    async with running(runtime):
        assets = AssetsUnderTest(settings, Blobs(settings), bus)
        if split:
            # The helper parser is warm before the file arrives, as on a service that has read a file before.
            await assets.upload(actor(), "first", documents.pdf(["a first file"]))

            async def warm() -> bool:
                return runtime.sandbox.helpers_ready() >= 1

            await probe_until(warm, timeout=60)
        before = helpers_so_far()
        version = await assets.upload(actor(), "book", data)
        helped = helpers_so_far() - before
        async with assets.db() as conn:
            rows = await conn.fetch(
                "SELECT locator, text, ocr FROM evidence WHERE asset_id = $1 ORDER BY ord", version["asset_id"]
            )
    return version, [(r["locator"], r["text"], r["ocr"]) for r in rows], helped


async def ingest(make_settings: Any, bus: BusClient, data: bytes, *, split: bool, **env: str) -> Outcome:
    """The passages and coverage of an active version, read by several parsers (`split`) or by one."""
    version, passages, helped = await upload(make_settings, bus, data, split=split, **env)
    assert version["status"] == "active", version
    # Split: at least one more parser read blocks; not split: none did.
    assert (helped >= 1) if split else (helped == 0)
    return passages, version["extraction"]


async def test_a_long_pdf_split_across_parsers_reads_as_one_parser_does(make_settings: Any, bus: BusClient) -> None:
    data = documents.book_pdf(400)
    one = await ingest(make_settings, bus, data, split=False)
    shared = await ingest(make_settings, bus, data, split=True)
    assert shared == one
    passages, coverage = one
    assert len(passages) == 400 - 400 // 37 and passages[0][0] == "page:1;label=i"
    assert passages[-1][0] == "page:400;label=C-392" and coverage["units_extracted"] == 400
    assert coverage["notes"] == [f"10 pages blank (pages {', '.join(str(37 * k) for k in range(1, 11))})"]


async def test_the_passage_limit_ends_a_split_pdf_where_it_ends_one(make_settings: Any, bus: BusClient) -> None:
    data = documents.book_pdf(300, seed=2)
    one = await ingest(make_settings, bus, data, split=False, DOSSIER_MAX_PASSAGES="250")
    shared = await ingest(make_settings, bus, data, split=True, DOSSIER_MAX_PASSAGES="250")
    assert shared == one
    passages, coverage = one
    assert len(passages) == 250 and coverage["status"] == "partial"
    assert any("limit of 250 passages" in note for note in coverage["notes"])


def without_ocr_timing(coverage: dict[str, Any]) -> dict[str, Any]:
    """The OCR note measures seconds, which no two runs share, split or not; everything else must match."""
    notes = [re.sub(r"\(\d+\.\d s, \d+\.\d\d pages/s\)", "(… s)", note) for note in coverage["notes"]]
    return {**coverage, "notes": notes}


async def test_ocr_pages_of_a_split_pdf_keep_the_files_ocr_budget(make_settings: Any, bus: BusClient) -> None:
    data = documents.book_pdf(260, seed=3, scanned=(150, 170))
    passages_one, one = await ingest(make_settings, bus, data, split=False, DOSSIER_OCR_MAX_PAGES="1")
    passages_shared, shared = await ingest(make_settings, bus, data, split=True, DOSSIER_OCR_MAX_PAGES="1")
    assert passages_shared == passages_one
    assert without_ocr_timing(shared) == without_ocr_timing(one)
    # Page 150 is read by OCR; page 170 is beyond the file's budget of one page, in either way.
    assert [loc for loc, _, ocr in passages_one if ocr] == ["page:150;label=C-142"]
    assert one["status"] == "partial" and any(note.endswith("page 170)") for note in one["notes"])


@pytest.mark.parametrize("limit", [{"DOSSIER_PARSE_CPU_SECONDS": "1"}, {"DOSSIER_PARSE_WALL_SECONDS": "0.3"}])
async def test_a_split_pdf_fails_at_a_limit_as_one_parser_does(
    make_settings: Any, bus: BusClient, limit: dict[str, str]
) -> None:
    """The file's CPU time is shared by its parsers and its deadline is one for all: 2,000 pages fit in
    neither, read by one parser or by several, and the version fails the same way."""
    data = documents.big_pdf(2000, seed=4)
    one, nothing, _ = await upload(make_settings, bus, data, split=False, **limit)
    shared, none_either, _ = await upload(make_settings, bus, data, split=True, **limit)
    assert one["status"] == shared["status"] == "failed" and nothing == none_either == []
    assert shared["error"] == one["error"]
    assert ("CPU or memory limit" if "DOSSIER_PARSE_CPU_SECONDS" in limit else "within 0.3 s") in one["error"]


SCAN = [[f"scanned page {n} holds the word {word}"] for n, word in enumerate(["alpha", "bravo", "delta", "kilo"], 1)]


async def test_a_short_scan_is_read_a_page_per_parser_as_one_parser_reads_it(
    make_settings: Any, bus: BusClient
) -> None:
    """Four scanned pages are far below the split's 64, but each costs seconds of OCR: they are shared a page
    at a time, and the passages and coverage are those of one parser."""
    data = scanned_pdf(SCAN)
    passages_one, one = await ingest(make_settings, bus, data, split=False)
    passages_shared, shared = await ingest(make_settings, bus, data, split=True)
    assert passages_shared == passages_one
    assert without_ocr_timing(shared) == without_ocr_timing(one)
    assert [loc for loc, _, ocr in passages_one if ocr] == ["page:1", "page:2", "page:3", "page:4"]
    assert all(
        word in text for (_, text, _), word in zip(passages_one, ["alpha", "bravo", "delta", "kilo"], strict=True)
    )
    assert one["status"] == "complete" and any(note.startswith("4 pages were read by OCR") for note in one["notes"])


async def test_a_scans_ocr_pages_are_shared_out_in_page_order_by_its_parsers(
    make_settings: Any, bus: BusClient
) -> None:
    """The file's OCR budget of pages is shared out page by page in page order: the first two pages are
    read by OCR and the rest reported, as by one parser."""
    data = scanned_pdf(SCAN)
    passages_one, one = await ingest(make_settings, bus, data, split=False, DOSSIER_OCR_MAX_PAGES="2")
    passages_shared, shared = await ingest(make_settings, bus, data, split=True, DOSSIER_OCR_MAX_PAGES="2")
    assert passages_shared == passages_one
    assert without_ocr_timing(shared) == without_ocr_timing(one)
    assert [loc for loc, _, ocr in passages_one if ocr] == ["page:1", "page:2"]
    assert one["status"] == "partial" and any(note.endswith("pages 3-4)") for note in one["notes"])


async def test_a_scans_ocr_seconds_are_overrun_by_at_most_a_page_per_parser(make_settings: Any, bus: BusClient) -> None:
    """Seconds are known only once spent: one parser reads the page it started past a budget of 10 ms, and two
    parsers at most the two pages they started. What is read is a prefix of the file, as one parser reads
    it, and every page after it is reported."""
    data = scanned_pdf(SCAN)
    passages_one, one = await ingest(make_settings, bus, data, split=False, DOSSIER_OCR_SECONDS="0.01")
    passages_shared, shared = await ingest(make_settings, bus, data, split=True, DOSSIER_OCR_SECONDS="0.01")
    assert [loc for loc, _, ocr in passages_one if ocr] == ["page:1"]
    assert passages_shared[:1] == passages_one and len(passages_shared) <= 2
    read = len(passages_shared)
    assert [loc for loc, _, _ in passages_shared] == [f"page:{n}" for n in range(1, read + 1)]
    for coverage, first_unread in ((one, 2), (shared, read + 1)):
        assert coverage["status"] == "partial" and coverage["units_extracted"] == first_unread - 1
        assert any(note.endswith(f"pages {first_unread}-4)") for note in coverage["notes"]), coverage
