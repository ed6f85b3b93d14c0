"""A real-world corpus of documents through the assets service: `make test-corpus DOSSIER_CORPUS=DIR`.

The corpus is a folder of other projects' test documents beside a MANIFEST.tsv (see docs/contributing.md); it
is not part of this repository, so this module is collected only when pytest is given `--corpus DIR`
(tests/conftest.py), and there a missing corpus fails rather than passes.

Every file's outcome is checked against the table below: active (complete, or partial with the reason),
failed with the reason (and a good version 1 of the same source stays active), or refused before it is
recorded with the error envelope. For every file the raw library (PyMuPDF, python-docx, openpyxl; lxml
for HTML) reads, its three most distinctive words are searched for in that source and must be found.
The corpus is test data of other projects: it is read in place, never copied into this repository.
"""

from __future__ import annotations

import asyncio
import csv
import re
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.assets.app import create_app
from shared.blobs import Blobs
from shared.bus import BusClient
from shared.contracts import assets as c
from shared.errors import DomainError
from shared.settings import AssetsSettings
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support.service import running

# (outcome, extraction status or error code, a phrase the notes or the error must contain)
EXPECTED: dict[str, tuple[str, str, str]] = {
    "pdf/docling__invisible_text_layer.pdf": ("active", "complete", ""),
    "pdf/docling__redp5110_sampled.pdf": ("active", "complete", "1 page blank (page 17)"),
    "pdf/pdfjs__ArabicCIDTrueType.pdf": ("active", "complete", ""),
    "pdf/pdfjs__empty.pdf": ("active", "complete", "1 page blank (page 1)"),
    # Vertical Japanese drawn without a text layer on pages 2-3: OCR reads horizontal lines only.
    "pdf/pdfjs__vertical.pdf": ("active", "partial", "OCR found no text there (pages 2-3)"),
    "pdf/pdfminer__pagelabels.pdf": ("active", "complete", ""),
    "pdf/pymupdf__cms-etc-filled.pdf": ("active", "complete", ""),
    "pdf/pymupdf__type3font.pdf": ("active", "complete", ""),
    "pdf/pypdf__multilang.pdf": ("active", "complete", ""),
    "pdf/unstructured__DA-619p.pdf": ("active", "complete", ""),
    "pdf/unstructured__multi-column.pdf": ("active", "complete", ""),
    "docx/docling__equations.docx": ("active", "complete", ""),
    "docx/poi__bib-chernigovka.netdo.ru_download_docs_17459.docx": ("active", "complete", ""),
    "docx/poi__stress004.docx": ("active", "complete", ""),
    "docx/tika__testWORD_phonetic.docx": ("active", "complete", ""),
    "docx/unstructured__handbook-872p.docx": ("active", "complete", ""),
    "xlsx/docling__xlsx_04_inflated.xlsx": ("active", "complete", ""),
    "xlsx/poi__ExcelPivotTableSample.xlsx": ("active", "complete", ""),
    "xlsx/poi__MatrixFormulaEvalTestData.xlsx": ("active", "complete", ""),
    # 37,696 non-empty cells: read whole under this suite's passage limit (see `corpus_assets`).
    "xlsx/poi__StructuredRefs-lots-with-lookups.xlsx": ("active", "complete", ""),
    "xlsx/poi__WithChartSheet.xlsx": ("active", "complete", ""),
    "xlsx/tika__testEXCEL_headers_footers.xlsx": ("active", "complete", ""),
    "xlsx/unstructured__2023-half-year-analyses-by-segment.xlsx": ("active", "complete", ""),
    "html/docling__html_rich_table_cells.html": ("active", "complete", ""),
    "html/docling__wiki_duck.html": ("active", "complete", ""),
    "html/tika__testArabicMisleadingCharset.html": ("active", "complete", "decoded as cp1256 (detected)"),
    "html/unstructured__example-10k.html": ("active", "complete", ""),
    "html/unstructured__fake-html-cp1252.html": ("active", "complete", ""),
    "hostile/docling__2206.01062_pg3.pdf": ("active", "partial", "the file is encrypted"),
    "hostile/pdfminer__issue-1113-evil-xobjects.pdf": ("active", "partial", "repaired: 1 page recovered (page 1)"),
    "hostile/poi__54764.xlsx": ("failed", "failed", "declares a DTD or entities"),
    "hostile/poi__clusterfuzz-testcase-minimized-POIXWPFFuzzer-5313273089884160.docx": ("refused", "unsupported", ""),
    "hostile/poi__poc-shared-strings.xlsx": ("active", "partial", "passages were cut at 20000 characters"),
    "hostile/poi__xxe_in_schema.xlsx": ("active", "complete", ""),
    # Encrypted with the empty user password: opened, and its one scanned page read by OCR.
    "hostile/pypdf__encrypted_doc_no_id.pdf": ("active", "complete", "1 page was read by OCR"),
    "hostile/pypdf__r6-user-password.pdf": ("active", "partial", "the file is encrypted"),
    "hostile/qpdf__bad-encryption-length.pdf": ("active", "partial", "the file is encrypted"),
    "hostile/qpdf__deep-pages.pdf": ("active", "partial", "1 page could not be read (page 1)"),
    "hostile/qpdf__issue-335b.pdf": ("refused", "unsupported", ""),
    "hostile/tika__testDdeLink.xlsx": ("active", "complete", ""),
    "hostile/tika__testHTML_embedded_data_uri_js.html": ("active", "complete", ""),
    "hostile/tika__testPDF_deeplyEmbeddedAttachments.pdf": ("active", "complete", ""),
    "hostile/tika__testSubdocument.docx": ("active", "partial", "sub-documents (external files) not read: 2"),
    "hostile/tika__testWORD_protected_passtika.docx": ("refused", "unsupported", ""),
    "hostile/tika__test_recursive_embedded.docx": ("active", "partial", "embedded objects not read: 1"),
    "hostile/unstructured__example-with-scripts.html": ("active", "complete", ""),
    "hostile/unstructured__password_protected.xlsx": ("refused", "unsupported", ""),
}
_EDGES = ".,;:!?()[]{}\"'«»“”‘’`*"
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


@dataclass
class Outcome:
    path: str
    source_id: str
    version: dict[str, Any] | None = None
    refusal: DomainError | None = None


def manifest(corpus: Path) -> list[dict[str, str]]:
    path = corpus / "MANIFEST.tsv"
    if not path.is_file():
        pytest.fail(
            f"the corpus is missing: {path} (give its folder with --corpus, or DOSSIER_CORPUS to make test-corpus)"
        )
    with open(path, encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def raw_text(path: Path, kind: str) -> str:
    """What the raw library alone reads (the manifest's `raw_ok` column says whether it opens the file)."""
    if kind == "pdf":
        import pymupdf

        with pymupdf.open(path) as doc:
            if doc.needs_pass and not doc.authenticate(""):
                return ""
            return "\n".join(page.get_text("text") for page in doc)
    if kind == "docx":
        import docx

        document = docx.Document(str(path))
        texts = [p.text for p in document.paragraphs]
        texts += [cell.text for table in document.tables for row in table.rows for cell in row.cells]
        return "\n".join(texts)
    if kind == "xlsx":
        import openpyxl

        with open(path, "rb") as fh:
            book = openpyxl.load_workbook(fh, read_only=True)
            return "\n".join(str(v) for ws in book.worksheets for row in ws.iter_rows(values_only=True) for v in row)
    import lxml.html

    tree = lxml.html.fromstring(path.read_bytes())
    for element in tree.iter("script", "style"):
        element.drop_tree()
    # Text nodes apart, as a reader sees them: text_content() would glue "Name" and "Description" of
    # neighbouring table cells into one word that no page shows.
    return " ".join(tree.itertext())


def distinctive_words(text: str, n: int = 3) -> list[str]:
    """The rarest whole words (letters only, whitespace-delimited), longest first among equals."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for token in text.split():
        word = token.strip(_EDGES)
        cjk = bool(_CJK.search(word))
        if not word.isalpha() or len(word) > 40 or len(word) < (2 if cjk else 5):
            continue
        counts[word.lower()] += 1
        first.setdefault(word.lower(), word)
    ranked = sorted(counts, key=lambda w: (counts[w], -len(w), w))
    return [first[w] for w in ranked[:n]]


async def upload(assets: AssetsUnderTest, who: Any, corpus: Path, rel: str, slots: asyncio.Semaphore) -> Outcome:
    outcome = Outcome(rel, f"corpus-{uuid.uuid4().hex[:8]}")
    async with slots:
        if EXPECTED[rel][0] == "failed":
            # A failed version must never replace a good one: the source gets a readable version 1 first.
            good = await assets.upload(who, outcome.source_id, b"A readable first version.\n")
            assert good["status"] == "active"
        try:
            outcome.version = await assets.upload(who, outcome.source_id, (corpus / rel).read_bytes())
        except DomainError as exc:
            outcome.refusal = exc
    return outcome


def check(outcome: Outcome, source: dict[str, Any] | None) -> list[str]:
    want, status, phrase = EXPECTED[outcome.path]
    if outcome.refusal is not None:
        exc = outcome.refusal
        got = ("refused", exc.code, exc.message)
        if want == "refused" and exc.code == status and exc.details == {"field": "file"}:
            return []
        return [f"{outcome.path}: expected {want}/{status}, got {got}"]
    v = outcome.version
    assert v is not None
    notes = v["extraction"]["notes"] if v["extraction"] else []
    said = " | ".join([*notes, v["error"] or ""])
    problems = []
    if (v["status"], v["extraction"]["status"]) != (want, status):
        problems.append(
            f"{outcome.path}: expected {want}/{status}, got {v['status']}/{v['extraction']['status']}: {said}"
        )
    elif phrase not in said:
        problems.append(f"{outcome.path}: expected the notes to say {phrase!r}, got {said!r}")
    elif status == "complete" and not phrase and notes:
        problems.append(f"{outcome.path}: complete, yet with notes: {notes}")
    if want == "failed" and (source is None or source["active_version"] != 1):
        problems.append(f"{outcome.path}: the failed version replaced the good version 1: {source}")
    return problems


@pytest.fixture
async def corpus_assets(make_settings: Callable[..., AssetsSettings], bus: BusClient) -> AsyncIterator[AssetsUnderTest]:
    # Default limits, except passages: one cell is one passage, and the corpus's largest workbook has
    # 37,696 cells (the default 20,000 stops it as partial, which tests/service/assets/test_extraction
    # proves on its own); its words are part of what the raw library reads.
    settings = make_settings(DOSSIER_MAX_PASSAGES="50000")
    async with running(create_app(settings)):
        yield AssetsUnderTest(settings, Blobs(settings), bus)


@pytest.mark.timeout(600)
async def test_the_corpus(corpus_assets: AssetsUnderTest, pytestconfig: pytest.Config) -> None:
    assets = corpus_assets
    given = pytestconfig.getoption("corpus")
    if not given:
        pytest.fail("no corpus given: run make test-corpus DOSSIER_CORPUS=DIR (or pytest --corpus DIR)")
    corpus = Path(given)
    rows = manifest(corpus)
    assert sorted(r["relative_path"] for r in rows) == sorted(EXPECTED), "the manifest and the table disagree"
    who = actor()
    slots = asyncio.Semaphore(3)
    outcomes = await asyncio.gather(*(upload(assets, who, corpus, r["relative_path"], slots) for r in rows))
    problems: list[str] = []
    counts: Counter[str] = Counter()
    found = asked = 0
    for row, outcome in zip(rows, outcomes, strict=True):
        source = None
        if outcome.version is not None:
            source = await assets.bus.call_raw(c.GET_SOURCE, {"source_id": outcome.source_id}, actor=who)
        problems += check(outcome, source)
        if outcome.version is None:
            counts["refused"] += 1
        elif outcome.version["status"] == "active":
            counts[f"active ({outcome.version['extraction']['status']})"] += 1
        else:
            counts[outcome.version["status"]] += 1
        if row["raw_ok"] != "true":
            continue
        for word in distinctive_words(raw_text(corpus / row["relative_path"], row["kind"])):
            asked += 1
            reply = await assets.bus.call_raw(
                c.SEARCH, {"q": word, "source_id": outcome.source_id, "limit": 3}, actor=who, timeout=30
            )
            if reply["items"]:
                found += 1
            else:
                problems.append(f"{row['relative_path']}: the raw library's word {word!r} is not found by search")
    print(f"\ncorpus: {dict(counts)}; raw words found by search: {found}/{asked}")
    assert not problems, "\n".join(problems)
    # The service survived every file: it still answers, and still extracts.
    after = await assets.upload(who, "after-the-corpus", b"Still standing after the corpus.\n")
    assert after["status"] == "active"
