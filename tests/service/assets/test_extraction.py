"""Extraction through the real sandbox process: locators of every format, damaged and hostile files."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import pytest

from services.assets.app import create_app
from shared.blobs import Blobs
from shared.bus import BusClient
from shared.contracts import assets as c
from shared.errors import Invalid, TooLarge, Unsupported
from shared.settings import AssetsSettings
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support import documents
from tests.support.service import running


async def passages(assets: AssetsUnderTest, asset_id: str) -> list[tuple[str, str]]:
    async with assets.db() as conn:
        rows = await conn.fetch("SELECT locator, text FROM evidence WHERE asset_id = $1 ORDER BY ord", asset_id)
    return [(r["locator"], r["text"]) for r in rows]


async def test_pdf_pages(assets: AssetsUnderTest) -> None:
    v = await assets.upload(actor(), "p", documents.pdf(["Alpha page text.", "", "Gamma page text."]))
    assert v["status"] == "active" and v["kind"] == "pdf"
    got = await passages(assets, v["asset_id"])
    assert got == [("page:1", "Alpha page text."), ("page:3", "Gamma page text.")]
    # A blank page (no text layer, nothing drawn) offers nothing and hides nothing: complete, and said.
    assert v["extraction"]["status"] == "complete" and v["extraction"]["units_total"] == 3
    assert v["extraction"]["notes"] == ["1 page blank (page 2)"]


async def test_docx_heading_paths_and_paragraph_numbers(assets: AssetsUnderTest) -> None:
    data = documents.docx(
        [
            ("p", "Preface before any heading."),
            ("h1", "Risk"),
            ("p", "Liquidity is tight."),
            ("h2", "Gates; swing/pricing"),
            ("p", "Gates were used once."),
            ("h1", "Outlook"),
            ("table", "cell"),
        ]
    )
    v = await assets.upload(actor(), "d", data, filename="report.docx")
    assert (v["kind"], v["status"], v["extraction"]["status"]) == ("docx", "active", "complete")
    got = await passages(assets, v["asset_id"])
    assert got[:6] == [
        ("docx:h=;p=1", "Preface before any heading."),
        ("docx:h=Risk;p=2", "Risk"),
        ("docx:h=Risk;p=3", "Liquidity is tight."),
        ("docx:h=Risk/Gates%3B swing%2Fpricing;p=4", "Gates; swing/pricing"),
        ("docx:h=Risk/Gates%3B swing%2Fpricing;p=5", "Gates were used once."),
        ("docx:h=Outlook;p=6", "Outlook"),
    ]
    assert got[6:] == [(f"docx:h=Outlook;p={7 + i}", f"cell {i + 1}") for i in range(4)]
    assert v["extraction"]["units_total"] == v["extraction"]["units_extracted"] == 10


async def test_xlsx_cells_and_formulas_as_text(assets: AssetsUnderTest) -> None:
    data = documents.xlsx(
        {
            "Flows": {"A1": "Outflow", "B1": 120, "B2": 80, "B3": "=SUM(B1:B2)"},
            "Q3 notes": {"C4": "Gate activated"},
        }
    )
    v = await assets.upload(actor(), "x", data)
    assert (v["kind"], v["status"]) == ("xlsx", "active")
    got = dict(await passages(assets, v["asset_id"]))
    assert got == {
        "xlsx:Flows!A1": "Outflow",
        "xlsx:Flows!B1": "120",
        "xlsx:Flows!B2": "80",
        "xlsx:Flows!B3": "=SUM(B1:B2)",  # the formula's text, never a computed 200
        "xlsx:Q3 notes!C4": "Gate activated",
    }


async def test_html_is_sanitized_static_text(assets: AssetsUnderTest) -> None:
    html = b"""<!DOCTYPE html><html><head><title>Fund note</title><style>p{color:red}</style>
    <script>alert(1)</script></head><body onload="alert(2)"><h1>Liquidity</h1>
    <p>Redemptions <b>rose</b>.<img src=x onerror="alert(3)"></p><a href="javascript:alert(4)">source</a>
    <!-- <script>alert(5)</script> --><svg onload="alert(6)"><script>alert(7)</script></svg>
    <noscript><script>alert(8)</script></noscript><iframe srcdoc="<script>alert(9)</script>"></iframe>
    <div onclick="alert(10)">Gates held.</div></body></html>"""
    v = await assets.upload(actor(), "h", html, filename="note.txt")  # the name lies; the bytes decide
    assert (v["kind"], v["status"]) == ("html", "active")
    got = await passages(assets, v["asset_id"])
    assert got == [
        ("html:s=1", "Fund note"),
        ("html:s=2", "Liquidity"),
        ("html:s=3", "Redemptions rose."),
        ("html:s=4", "source"),
        ("html:s=5", "Gates held."),
    ]
    assert not any("alert(" in text or "<" in text for _, text in got)


async def test_text_line_ranges(assets: AssetsUnderTest) -> None:
    lines = ["Title line", "", "para two a", "para two b", "", ""] + [f"long {i}" for i in range(45)]
    v = await assets.upload(actor(), "t", "\n".join(lines).encode(), filename="notes.pdf")
    assert (v["kind"], v["status"]) == ("text", "active")
    got = [loc for loc, _ in await passages(assets, v["asset_id"])]
    assert got == ["text:l=1-1", "text:l=3-4", "text:l=7-46", "text:l=47-51"]


async def test_encrypted_and_truncated_pdfs_are_partial(assets: AssetsUnderTest) -> None:
    who = actor()
    enc = await assets.upload(who, "enc", documents.encrypted_pdf())
    assert enc["status"] == "active" and enc["extraction"]["status"] == "partial"
    assert enc["extraction"]["units_total"] == 2 and enc["extraction"]["units_extracted"] == 0
    assert any("encrypted" in n for n in enc["extraction"]["notes"])
    cut = await assets.upload(who, "cut", documents.truncated_pdf())
    assert cut["status"] == "active" and cut["extraction"]["status"] == "partial"
    assert any("repaired" in n for n in cut["extraction"]["notes"])


async def test_refused_before_recording(assets: AssetsUnderTest) -> None:
    who = actor()
    with pytest.raises(Unsupported):
        await assets.upload(who, "r", documents.random_bytes())
    with pytest.raises(Invalid) as empty:
        await assets.upload(who, "r", b"")
    assert empty.value.details["field"] == "file"
    blob = await assets.put(b"x" * 100)
    too_big = {**blob, "size": assets.settings.max_upload_bytes + 1}
    with pytest.raises(TooLarge) as big:
        await assets.bus.call_raw(c.UPLOAD, {"source_id": "r", "blob": too_big}, actor=who)
    assert big.value.details["limit"] == assets.settings.max_upload_bytes
    lying = {**blob, "sha256": "0" * 64}
    with pytest.raises(Invalid):
        await assets.bus.call_raw(c.UPLOAD, {"source_id": "r", "blob": lying}, actor=who)
    async with assets.db() as conn:
        assert await conn.fetchval("SELECT count(*) FROM asset_versions") == 0


async def test_zip_bomb_and_billion_laughs_fail_alone(assets: AssetsUnderTest) -> None:
    who = actor()
    bomb = documents.zip_bomb_docx()
    started = time.monotonic()
    v = await assets.upload(who, "bomb", bomb)
    assert time.monotonic() - started < 10  # the bound: rejected within seconds
    assert (v["kind"], v["status"]) == ("docx", "failed") and "zip bomb" in v["error"]
    laughs = await assets.upload(who, "laughs", documents.billion_laughs_xlsx())
    assert (laughs["kind"], laughs["status"]) == ("xlsx", "failed") and "DTD" in laughs["error"]
    assert await assets.bus.ping("assets")
    fine = await assets.upload(who, "fine", documents.pdf(["still working"]))
    assert fine["status"] == "active"


@pytest.fixture
async def strict_assets(make_settings: Callable[..., AssetsSettings], bus: BusClient) -> AsyncIterator[AssetsUnderTest]:
    settings = make_settings(DOSSIER_PARSE_CPU_SECONDS="1", DOSSIER_MAX_PASSAGES="3", DOSSIER_MAX_PARTS="4")
    async with running(create_app(settings)):
        yield AssetsUnderTest(settings, Blobs(settings), bus)


async def test_limits_bound_a_file_or_fail_it_and_the_service_lives_on(strict_assets: AssetsUnderTest) -> None:
    who = actor()
    pages = await strict_assets.upload(who, "pages", documents.pdf([f"page {n}" for n in range(1, 7)]))
    assert pages["status"] == "active" and pages["extraction"]["status"] == "partial"
    assert (pages["extraction"]["units_total"], pages["extraction"]["units_extracted"]) == (6, 3)
    notes = " ".join(pages["extraction"]["notes"])
    assert "first 4 of 6 pages" in notes and "limit of 3 passages" in notes
    # Pure-Python HTML parsing of 22 MB takes seconds of CPU: the sandbox's RLIMIT_CPU stops it.
    hostile = await strict_assets.upload(who, "hostile", b"<p>word</p>" * 2_000_000)
    assert hostile["status"] == "failed" and "CPU or memory limit" in hostile["error"]
    assert await strict_assets.bus.ping("assets")
    ok = await strict_assets.upload(who, "ok", documents.pdf(["fine"]))
    assert ok["status"] == "active"
