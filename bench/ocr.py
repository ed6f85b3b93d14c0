"""OCR benchmark: Dossier's OCR engine against Tesseract on the same page images (not part of the test run).

Six scanned pages (a page of text rendered at 200 dpi and pasted as an image, no text layer) are rendered
at the resolution Dossier's OCR uses (`ocr_dpi`, shared.settings) exactly as services.assets.extract.ocr
renders them. On each page image, in the same run and one after another:

- Dossier's engine as the parser configures it (services.assets.extract.ocr.Ocr: RapidOCR, one thread),
  in process, so its seconds are the engine's alone;
- Tesseract (`tesseract IMAGE stdout`), as installed, with its own default threads and with
  `OMP_THREAD_LIMIT=1`, where it is on the PATH; where it is not, the anchor is skipped with a message and
  no GOAL line is printed for it.

Then the whole file as the assets service reads it (services.assets.splitting.extract_file, real confined
parsers from services.assets.app.create_sandbox with the default settings): once by one parser, and once
shared out a page at a time over as many parsers as the service has extraction slots (its helpers warm, as
on a service that has read a file before), each timed from the file's first byte read to its coverage.

Words found: of each page's words (lowered, letters only), how many the engine's text holds, counted with
their multiplicity. Each engine's seconds per page is the median over `--trials` passes. The GOALs: seconds
per page of the file as the service reads it ≤ 1.0× Tesseract's (the faster of its two runs), and words
found ≥ Tesseract's; beside them, the engine on one core, and the bound that spreading the pages over every
core could reach at best.

Run: `python bench/ocr.py` (`--dpi N` to measure another rendering resolution, `--pages N`).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pymupdf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stats import goal
from services.assets.app import create_sandbox
from services.assets.extract.ocr import Ocr
from services.assets.queueing import FairSlots
from services.assets.splitting import extract_file
from shared.settings import AssetsSettings
from tests.support.fidelity import body_text_scan
from tests.support.probe import probe_until

SCAN_DPI = 200
_WORD = re.compile(r"[^\W\d_]+")


def page_words(seed: int, lines: int = 34) -> list[str]:
    rnd = random.Random(seed)
    vocabulary = (
        "fund redemption liquidity notice investors portfolio assets quarter report capital manager"
        " market board policy risk value shares period annual statement equity credit interest rate"
        " committee review approved suspended memorandum exposure holdings balance cash income"
    ).split()
    return [" ".join(rnd.choice(vocabulary) for _ in range(rnd.randint(7, 10))) for _ in range(lines)]


def scanned_document(pages: int) -> tuple[bytes, list[list[str]]]:
    """An image-only PDF: each page is a letter-size page of text rendered at SCAN_DPI and pasted whole."""
    truth = [page_words(n) for n in range(pages)]
    return body_text_scan(truth, dpi=SCAN_DPI), truth


def words(text: str) -> collections.Counter[str]:
    return collections.Counter(w.lower() for w in _WORD.findall(text))


def found(truth: list[str], text: str) -> int:
    want, got = words("\n".join(truth)), words(text)
    return sum(min(n, got[w]) for w, n in want.items())


def tesseract_page(image: Path, *, one_thread: bool) -> str:
    env = dict(os.environ)
    if one_thread:
        env["OMP_THREAD_LIMIT"] = "1"
    done = subprocess.run(["tesseract", str(image), "stdout"], capture_output=True, env=env, check=True)
    return done.stdout.decode("utf-8", "replace")


async def as_the_service_reads(data: bytes, *, split: bool, trials: int) -> tuple[list[float], str]:
    """Seconds for the whole file through the assets service's sandbox (median-ready list), and its text."""
    settings = AssetsSettings() if split else AssetsSettings(extract_split_pages=0)
    sandbox = create_sandbox(settings)
    slots = FairSlots(settings.extract_concurrency, per_scope=settings.extract_concurrency)
    texts: list[str] = []

    async def sink(locator: str, text: str, meta: dict[str, object]) -> None:
        texts.append(text)

    async def warm() -> bool:
        return sandbox.helpers_ready() >= settings.extract_concurrency - 1

    seconds: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scan.pdf"
        path.write_bytes(data)
        sandbox.start()
        try:
            for trial in range(trials + 1):
                texts.clear()
                started = time.perf_counter()
                async with slots.slot("bench"):
                    await extract_file(sandbox, path, "pdf", sink, slots)
                if trial:  # the first file warms the helpers, as on a service that has read one before
                    seconds.append(time.perf_counter() - started)
                if split:
                    await probe_until(warm, timeout=60)
        finally:
            await sandbox.close()
    return seconds, "\n".join(texts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=6)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--dpi", type=int, default=AssetsSettings.model_fields["ocr_dpi"].default)
    args = parser.parse_args()
    data, truth = scanned_document(args.pages)
    total = sum(sum(words("\n".join(t)).values()) for t in truth)
    engine = Ocr(max_pages=10**6, seconds=1e9, dpi=args.dpi)
    tesseract = shutil.which("tesseract")
    timings: dict[str, list[float]] = collections.defaultdict(list)
    hits: dict[str, int] = collections.defaultdict(int)
    with pymupdf.open(stream=data, filetype="pdf") as doc, tempfile.TemporaryDirectory() as tmp:
        images = []
        for n, page in enumerate(doc):
            # The image Dossier's engine reads: the page rendered at its dpi, as Ocr.read_page renders it.
            path = Path(tmp) / f"page{n}.png"
            path.write_bytes(page.get_pixmap(dpi=args.dpi, colorspace="rgb", alpha=False).tobytes("png"))
            images.append(path)
        engine.read_page(doc[0])  # loads the models: not a page's cost
        for trial in range(args.trials):
            for n, page in enumerate(doc):
                runs = [("dossier", lambda page=page: engine.read_page(page))]
                if tesseract:
                    runs.append(("tesseract", lambda n=n: tesseract_page(images[n], one_thread=False)))
                    runs.append(("tesseract-1t", lambda n=n: tesseract_page(images[n], one_thread=True)))
                for name, run in runs if (trial + n) % 2 else runs[::-1]:
                    started = time.perf_counter()
                    text = run()
                    timings[name].append(time.perf_counter() - started)
                    if trial == 0:
                        hits[name] += found(truth[n], text)
    defaults = AssetsSettings()
    if args.dpi == defaults.ocr_dpi:
        for name, split in (("service-1", False), ("service", True)):
            seconds, text = asyncio.run(as_the_service_reads(data, split=split, trials=args.trials))
            timings[name] = [s / args.pages for s in seconds]
            hits[name] = found([w for t in truth for w in t], text)
    print(f"OCR: {args.pages} pages scanned at {SCAN_DPI} dpi, read at {args.dpi} dpi; {total} words on them")
    per_page = {name: statistics.median(seconds) for name, seconds in timings.items()}
    described = {
        "dossier": "engine, in process, one core",
        "service-1": "the file as the service reads it, one parser",
        "service": f"the file as the service reads it, {defaults.extract_concurrency} parsers",
        "tesseract": "Tesseract, its default threads",
        "tesseract-1t": "Tesseract, one thread",
    }
    for name in timings:
        print(
            f"  {per_page[name]:6.3f} s/page   words found {hits[name]:5d} ({hits[name] / total:.1%})   {described[name]}"
        )
    if not tesseract:
        print(
            "  Tesseract is not installed here (no `tesseract` on the PATH): the anchor and its GOAL lines are skipped"
        )
        return 0
    # The anchor is Tesseract as it runs fastest here: its default threads, or one thread when OpenMP's
    # threads only contend on a busy machine.
    anchor = min(per_page["tesseract"], per_page["tesseract-1t"])
    cores = os.cpu_count() or 1
    print(
        f"  Dossier's engine, its pages spread over all {cores} cores with no loss at all (a bound): "
        f"{per_page['dossier'] / cores:.3f} s/page = {per_page['dossier'] / cores / anchor:.2f}x Tesseract's"
    )
    print(f"  Dossier's engine on one core ÷ Tesseract's: {per_page['dossier'] / anchor:.2f}x")
    if "service" not in per_page:
        print(f"  the service's own reading is measured at its own resolution only ({defaults.ocr_dpi} dpi)")
        goal("OCR s/page (Dossier engine, one core) ÷ Tesseract's", per_page["dossier"] / anchor, 1.0, at_most=True)
        goal("OCR words found (Dossier) ÷ Tesseract's", hits["dossier"] / max(1, hits["tesseract"]), 1.0, at_most=False)
        return 0
    print(f"  the service, {per_page['service-1'] / per_page['service']:.2f}x faster with its pages shared out")
    goal("OCR s/page (the file as the service reads it) ÷ Tesseract's", per_page["service"] / anchor, 1.0, at_most=True)
    goal("OCR words found (the service) ÷ Tesseract's", hits["service"] / max(1, hits["tesseract"]), 1.0, at_most=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
