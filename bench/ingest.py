"""Ingest and evidence-search benchmark on a whole local stack (not part of the test run).

1. Pages per second for a generated 500-page PDF, from the start of the upload until the gateway answers
   with the version `active` (upload, object storage, bus, sandboxed extraction, evidence with its
   full-text index, activation), against raw in-process PyMuPDF extraction of the same file on one thread
   in the same run. Two stacks run side by side: one whose assets service splits a long PDF across its
   free parser slots (the default) and one that reads every file with one parser
   (`DOSSIER_EXTRACT_SPLIT_PAGES=0`, the path before the split); each trial measures raw, one parser and
   split, in turns. The goal is split ≥ 1.2× raw (issue 42: ≥ 1.1×); the one-parser ratio is printed beside it, and so is
   the processor time an upload takes in each process of each stack (bench/_cpu.py), with PostgreSQL's
   share for the passages' full-text vectors alone: together they bound the wall time on the machine's
   cores. The stack's processor time per upload over raw's (process time of the in-process extraction) is
   the second goal (≤ 1.6×): counted until the version is active and, for the goal, with the assets
   service's time in the SETTLE_SECONDS after each upload, when it starts the parsers that replace the
   ones the file used (every file pays for them, mostly after it is active). It is printed beside its
   floor: raw's parse, the full-text vectors and the gateway's share, which no change in the service's own
   code removes.
   Then many small files on the splitting stack: SMALL_FILES two-page PDFs, four in flight at a time, in
   files per second and processor time per file by process. Each file takes a parser of its own, and a
   spare is started for the next: here a parser's start is most of what a file costs (what the spare
   imports before its job is the lever; services/assets/parser.py). A parser's start is then measured on
   its own (processor time, five starts of the service's own sandbox, each stopped once ready).
2. Evidence search median and p99 through the gateway with 100k passages (`--passages N`; `make
   bench-growth` runs 1,000,000) in the assets database (the
   passages are inserted directly; extracting 100k pages would only measure item 1 again). Queries are
   one to three words from common to rare; any word may match, so common words are in the measure.
   The goal is taken right after the bulk insert, the harder case: 100k rows copied in one go leave
   every heap page without hint bits and an autovacuum due, which a database filled over time never
   shows all at once. The bench then vacuums and prints the settled figure too (before the GIN pending
   list was bounded, the p99 of the same queries fell from 108-155 ms to 25-46 ms once autovacuum had run).
   Past 100k (`make bench-growth`), the store is measured at 100k first and then grown to N, and the
   ratio of the two p99s is a GOAL (≤ 2.5×, after the insert and settled): an absolute figure differs
   from machine to machine, the ratio much less.

3. With `--corpus DIR` (a folder of real-world files, as `make test-corpus` takes): every file of it
   uploaded at once (one request each, all in flight together) to the splitting stack, timed from the
   first request to the last answer; the PDFs' pages per second of that wall time, beside raw in-process
   PyMuPDF over the same PDFs one after another on one thread.

Run: `python bench/ingest.py` (or `make bench`); `--ingest-only` runs item 1 alone, `--search-only` item 2.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import random
import resource
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import pymupdf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cpu import CpuMeter, print_split, stack_pids
from bench._stats import goal
from services.assets.app import create_sandbox
from shared.settings import AssetsSettings
from tests.support.documents import big_pdf
from tests.support.stack import RunningStack, start_stack, stop_stack

PAGES = 500
TRIALS = 5
SETTLE_SECONDS = 2.0
PARSER_STARTS = 5
SMALL_FILES = 60
SMALL_IN_FLIGHT = 4
PASSAGES = 100_000
PASSAGES_PER_VERSION = 500
QUERIES = 300


# Processor seconds of each raw extraction (in-process, one thread), beside its wall time.
RAW_CPU: list[float] = []


def raw_extraction_seconds(data: bytes) -> float:
    started, cpu = time.perf_counter(), time.process_time()
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        texts = [page.get_text("text") for page in doc]
    elapsed = time.perf_counter() - started
    RAW_CPU.append(time.process_time() - cpu)
    assert len(texts) == PAGES
    return elapsed


@dataclass
class Ingesting:
    """A stack under the ingest benchmark: its client, the processor time its uploads took until their versions
    were active (`spent`) and in the settle after each (`after`), its last version."""

    api: httpx.Client
    meter: CpuMeter
    spent: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    asset_id: str = ""

    def settle(self) -> None:
        """Waits SETTLE_SECONDS after an upload, counting what the stack spends meanwhile: mostly the parsers
        the assets service starts to replace the ones the file used (its spare, a split file's helper)."""
        self.meter.start()
        time.sleep(SETTLE_SECONDS)
        for name, seconds in self.meter.stop().items():
            self.after[name] = self.after.get(name, 0.0) + seconds

    def clear(self) -> None:
        self.spent.clear()
        self.after.clear()

    def upload(self, data: bytes, source_id: str) -> float:
        """Seconds from the upload's start until the gateway answers with the version active."""
        self.meter.start()
        started = time.perf_counter()
        r = self.api.post("/v1/assets", data={"source_id": source_id}, files={"file": ("big.pdf", data)})
        elapsed = time.perf_counter() - started
        for name, seconds in self.meter.stop().items():
            self.spent[name] = self.spent.get(name, 0.0) + seconds
        r.raise_for_status()
        version = r.json()
        assert version["status"] == "active" and version["extraction"]["units_extracted"] == PAGES, version
        self.asset_id = version["asset_id"]
        return elapsed


async def index_seconds(dsn: str, asset_id: str) -> float:
    """What PostgreSQL spends on the full-text vectors of one version's passages alone (best of three)."""
    conn = await asyncpg.connect(dsn)
    try:
        timings = []
        for _ in range(3):
            started = time.perf_counter()
            await conn.fetchval(
                "SELECT sum(length(dossier_tsv(lang, text))) FROM evidence WHERE asset_id = $1", asset_id
            )
            timings.append(time.perf_counter() - started)
        return min(timings)
    finally:
        await conn.close()


def ingest_benchmark(stacks: dict[str, Ingesting], split_dsn: str) -> None:
    # A warm-up upload on each, so that the first measured one does not pay for connection set-up.
    for stack in stacks.values():
        stack.upload(big_pdf(PAGES, seed=0), "warm-up")
        stack.settle()
        stack.clear()
    raw: list[float] = []
    timed: dict[str, list[float]] = {"single": [], "split": []}
    for trial in range(1, TRIALS + 1):
        data = big_pdf(PAGES, seed=trial)  # new bytes each time: every trial is a new version
        raw.append(raw_extraction_seconds(data))
        # In turns, so that neither path always follows the other (the spare parsers warm after each file).
        order = ["single", "split"]
        for name in order if trial % 2 else order[::-1]:
            timed[name].append(stacks[name].upload(data, f"bench-{trial}"))
            # Its spare parsers are warm again before its next file arrives, as on a service up a while.
            stacks[name].settle()
    raw_pps = PAGES / statistics.median(raw)
    single_pps, split_pps = (PAGES / statistics.median(timed[name]) for name in ("single", "split"))
    print(f"ingest: {PAGES}-page PDF, median of {TRIALS} trials")
    print(f"  raw PyMuPDF in-process, one thread: {raw_pps:8.0f} pages/s  ({statistics.median(raw):.3f} s)")
    print(
        f"  upload → active, one parser:        {single_pps:8.0f} pages/s  ({statistics.median(timed['single']):.3f} s)"
    )
    print(
        f"  upload → active, split:             {split_pps:8.0f} pages/s  ({statistics.median(timed['split']):.3f} s)"
    )
    trials = "  ".join(f"{r:.3f}/{o:.3f}/{s:.3f}" for r, o, s in zip(raw, timed["single"], timed["split"], strict=True))
    print(f"  each trial, raw/one parser/split (s): {trials}")
    print(f"  one parser (the path before the split) ÷ raw: {single_pps / raw_pps:.2f}x")
    # Other work on the machine only ever adds time: the fastest trial of each is the least disturbed.
    best = {name: min(seconds) / min(raw) for name, seconds in timed.items()}
    print(
        f"  fastest trial of each ÷ fastest raw: one parser {1 / best['single']:.2f}x, split {1 / best['split']:.2f}x"
    )
    for name, label in (("single", "one parser"), ("split", "split")):
        print(f"  {label}:")
        wall = sum(timed[name])
        meter = stacks[name].meter
        print_split(stacks[name].spent, per=TRIALS, unit="upload, ms", scale=1e3, wall=wall, exact=meter.exact)
    index = asyncio.run(index_seconds(split_dsn, stacks["split"].asset_id))
    print(f"  of postgres's time, the full-text vectors of the {PAGES} passages alone: {index * 1000:.0f} ms")
    # Processor time per page of the whole stack (every process, parsers included) against raw's own: until
    # the version is active, and in all, with the assets service's time in the settle after each upload (the
    # parsers that replace the file's are started once it is read, and every file pays for them).
    raw_cpu = statistics.median(RAW_CPU)
    ratio = {name: sum(stacks[name].spent.values()) / TRIALS / raw_cpu for name in stacks}
    replacing = {name: stacks[name].after.get("assets", 0.0) / TRIALS for name in stacks}
    whole = {name: ratio[name] + replacing[name] / raw_cpu for name in stacks}
    print(
        f"  processor time per upload until active ÷ raw's ({raw_cpu * 1000:.0f} ms): one parser"
        f" {ratio['single']:.2f}x, split {ratio['split']:.2f}x"
    )
    print(
        f"  the assets service's time in the {SETTLE_SECONDS:g} s after each upload: one parser"
        f" {replacing['single'] * 1000:.0f} ms, split {replacing['split'] * 1000:.0f} ms"
    )
    print(f"  processor time per upload in all ÷ raw's: one parser {whole['single']:.2f}x, split {whole['split']:.2f}x")
    # What no change to the service's own code can remove: the parse itself (raw's), PostgreSQL's full-text
    # vectors of the passages, and the gateway receiving the upload.
    floor = (raw_cpu + index + stacks["split"].spent.get("gateway", 0.0) / TRIALS) / raw_cpu
    print(f"  floor of that ratio (raw parse + full-text vectors + gateway's upload): {floor:.2f}x")
    goal("ingest pages/s (split) ÷ raw PyMuPDF pages/s", split_pps / raw_pps, 1.2, at_most=False)
    goal("ingest pages/s (split) ÷ raw PyMuPDF pages/s, issue 42", split_pps / raw_pps, 1.1, at_most=False)
    goal("ingest processor time per page (split) ÷ raw's", whole["split"], 1.6, at_most=True)


async def _parser_starts(starts: int) -> float:
    sandbox = create_sandbox(AssetsSettings())
    if sandbox.problem is not None:
        raise SystemExit(f"no parser can start here: {sandbox.problem}")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(starts):
        # Started as the service starts its spares, and ended once ready (confined, its modules imported) by
        # the end of its job socket: it exits, and so do the processes of its confinement, each waited for
        # by its parent, so their time is counted here. (A parser killed instead would leave its confined
        # processes to be reaped elsewhere, and most of its start uncounted.)
        parser = await sandbox._spawn()
        parser.jobs.close()
        async with asyncio.timeout(30):
            ended = await parser.proc.wait()
        if ended != 0:
            raise SystemExit(f"a parser ended with {ended} at the end of its job socket")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    await sandbox.close()
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / starts


def parser_start_benchmark() -> None:
    """A parser's start on its own, in processor time: what each file pays for the spare that replaces its own."""
    seconds = asyncio.run(_parser_starts(PARSER_STARTS))
    print(
        f"a parser's start (confined, ready for a job), processor time: {seconds * 1000:.0f} ms (mean of {PARSER_STARTS})"
    )


def small_files_benchmark(url: str, headers: dict[str, str], meter: CpuMeter) -> None:
    """Many two-page PDFs: files per second and processor time per file, by process."""
    # Warm: the first files start the spares that later ones find ready.
    warm = [("small.pdf", big_pdf(2, seed=10_000 + n)) for n in range(SMALL_IN_FLIGHT)]
    asyncio.run(upload_all(url, headers, warm, prefix="warm", in_flight=SMALL_IN_FLIGHT))
    files = [("small.pdf", big_pdf(2, seed=20_000 + n)) for n in range(SMALL_FILES)]
    time.sleep(SETTLE_SECONDS)
    meter.start()
    wall, outcomes = asyncio.run(upload_all(url, headers, files, prefix="small", in_flight=SMALL_IN_FLIGHT))
    spent = meter.stop()
    assert outcomes == {"active": SMALL_FILES}, outcomes
    print(f"small files: {SMALL_FILES} two-page PDFs, {SMALL_IN_FLIGHT} in flight: {SMALL_FILES / wall:.1f} files/s")
    print_split(spent, per=SMALL_FILES, unit="file, ms", scale=1e3, wall=wall, exact=meter.exact)


def vocabulary(rnd: random.Random, size: int = 5000) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "qua", "bri", "dor", "fen", "gal", "hes"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rnd.choice(syllables) for _ in range(rnd.randint(2, 4))))
    return sorted(words)


async def insert_passages(dsn: str, scope: str, passages: int, first: int = 0) -> list[str]:
    """`passages` passages of Zipf-distributed words in active versions of a few hundred sources, after the
    `first` ones inserted before (each version's words drawn from its own seed, so a store grown in two
    steps holds what one filled at once would); the queries, the same whatever the size."""
    words = vocabulary(random.Random(42))
    # Cumulated once: the same draws as `weights=`, which would cumulate 5,000 weights on every call.
    cumulated = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    conn = await asyncpg.connect(dsn)
    try:
        for v in range(first // PASSAGES_PER_VERSION, (first + passages) // PASSAGES_PER_VERSION):
            rnd = random.Random(f"passages-{v}")
            source_pk = await conn.fetchval(
                "INSERT INTO sources (scope, source_id, latest_version) VALUES ($1, $2, 1) RETURNING pk",
                scope,
                f"passages-{v}",
            )
            asset_id = f"ast_{uuid.uuid4().hex}"
            content_hash = hashlib.sha256(asset_id.encode()).hexdigest()
            identity = hashlib.sha256(f"{scope}|upload|passages-{v}|{content_hash}".encode()).hexdigest()
            await conn.execute(
                "INSERT INTO asset_versions (id, source_pk, version, identity_key, root, content_hash, size, kind,"
                " blob_bucket, blob_key, status, extraction)"
                " VALUES ($1, $2, 1, $3, 'upload', $4, 1, 'text', 'bench', 'bench', 'active', $5)",
                asset_id,
                source_pk,
                identity,
                content_hash,
                '{"status": "complete", "units_total": 500, "units_extracted": 500, "notes": []}',
            )
            rows = []
            for n in range(1, PASSAGES_PER_VERSION + 1):
                text = " ".join(rnd.choices(words, cum_weights=cumulated, k=60))
                row = (f"ev_{asset_id[4:24]}_{n}", asset_id, scope, n, f"text:l={n}-{n}", text, _sha(text), "english")
                rows.append(row)
            # Indexed as English passages are: stems and exact forms, the larger of the two index shapes.
            await conn.copy_records_to_table(
                "evidence",
                records=rows,
                columns=["id", "asset_id", "scope", "ord", "locator", "text", "text_hash", "lang"],
            )
        await conn.execute("ANALYZE evidence")
        await conn.execute("ANALYZE asset_versions")
        await conn.execute("ANALYZE sources")
    finally:
        await conn.close()
    # Queries: one to three words, from common to rare.
    rnd = random.Random(7)
    return [" ".join(rnd.choice(words[: 50 * (1 + q % 60)]) for _ in range(1 + q % 3)) for q in range(QUERIES)]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def settle(admin_dsn: str) -> None:
    """What autovacuum and the next checkpoint do after the bulk insert: hint bits, visibility map, the GIN
    pending list merged, and the pages vacuum dirtied written out (else a search that evicts one of them
    writes it first, as seen in its plan's buffers). `admin_dsn`: the assets database as the superuser."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        for table in ("evidence", "asset_versions", "sources"):
            await conn.execute(f"VACUUM (ANALYZE) {table}")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


def search_timings(stack_url: str, token: str, queries: list[str]) -> tuple[list[float], int]:
    timings = []
    hits = 0
    with httpx.Client(base_url=stack_url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as api:
        for q in queries[:20]:  # warm the caches
            api.get("/v1/evidence/search", params={"q": q}).raise_for_status()
        for q in queries:
            t = time.perf_counter()
            r = api.get("/v1/evidence/search", params={"q": q, "limit": 10})
            timings.append(time.perf_counter() - t)
            r.raise_for_status()
            hits += len(r.json()["items"])
    return sorted(timings), hits


def p99_line(label: str, timings: list[float]) -> float:
    p99 = timings[min(len(timings) - 1, int(len(timings) * 0.99))]
    print(f"  {label:<30} median {statistics.median(timings) * 1000:7.1f} ms   p99 {p99 * 1000:7.1f} ms")
    return p99


def search_at(stack: RunningStack, token: str, scope: str, passages: int, first: int) -> tuple[float, float]:
    """Grows the store to `first + passages` passages; the p99 right after the bulk insert and settled."""
    stack_url, dsn = stack.url, stack.dsn("assets")
    started = time.perf_counter()
    queries = asyncio.run(insert_passages(dsn, scope, passages, first))
    total = first + passages
    print(f"search: {passages:,} passages inserted in {time.perf_counter() - started:.1f} s ({total:,} in all)")
    timings, hits = search_timings(stack_url, token, queries)
    print(f"  {QUERIES} queries of 1-3 words through the gateway, {hits / QUERIES:.1f} hits each on average")
    fresh = p99_line("right after the bulk insert:", timings)
    asyncio.run(settle(stack.admin_dsn("assets")))
    settled = p99_line("settled (vacuumed, checkpointed):", search_timings(stack_url, token, queries)[0])
    return fresh, settled


def search_benchmark(stack: RunningStack, token: str, scope: str, passages: int) -> None:
    """The p99 at `passages`; past PASSAGES, first at PASSAGES and then grown, with the ratio of the two (an
    absolute figure differs from machine to machine, the ratio much less)."""
    if passages <= PASSAGES:
        fresh, _ = search_at(stack, token, scope, passages, 0)
        goal(f"search p99 at {passages:,} passages", fresh * 1000, 50, at_most=True, unit=" ms")
        return
    base_fresh, base_settled = search_at(stack, token, scope, PASSAGES, 0)
    fresh, settled = search_at(stack, token, scope, passages - PASSAGES, PASSAGES)
    goal(f"search p99 at {passages:,} passages", fresh * 1000, 50, at_most=True, unit=" ms")
    goal(f"search p99, {passages:,} ÷ {PASSAGES:,} passages, after the insert", fresh / base_fresh, 2.5, at_most=True)
    goal(f"search p99, {passages:,} ÷ {PASSAGES:,} passages, settled", settled / base_settled, 2.5, at_most=True)


def raw_corpus(pdfs: list[Path]) -> tuple[int, float]:
    """Pages and seconds of raw PyMuPDF text extraction over `pdfs`, one after another, one thread (files
    PyMuPDF cannot open or read count no pages and no time)."""
    pages, seconds = 0, 0.0
    for path in pdfs:
        data = path.read_bytes()
        started = time.perf_counter()
        try:
            with pymupdf.open(stream=data, filetype="pdf") as doc:
                texts = [page.get_text("text") for page in doc]
        except Exception:
            continue
        seconds += time.perf_counter() - started
        pages += len(texts)
    return pages, seconds


async def upload_all(
    url: str, headers: dict[str, str], files: list[tuple[str, bytes]], *, prefix: str = "corpus", in_flight: int = 0
) -> tuple[float, dict[str, int]]:
    """Every file in one request of its own (source `{prefix}-{n}`), all at once or `in_flight` at a time;
    the wall time and a count of the outcomes."""
    outcomes: dict[str, int] = {}
    width = in_flight or len(files)
    slots = asyncio.Semaphore(width)
    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=600, limits=httpx.Limits(max_connections=width)
    ) as api:

        async def one(n: int, name: str, data: bytes) -> None:
            async with slots:
                r = await api.post("/v1/assets", data={"source_id": f"{prefix}-{n}"}, files={"file": (name, data)})
            key = r.json()["status"] if r.is_success else f"HTTP {r.status_code}"
            outcomes[key] = outcomes.get(key, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(one(n, name, data) for n, (name, data) in enumerate(files)))
        return time.perf_counter() - started, outcomes


def corpus_benchmark(url: str, headers: dict[str, str], corpus: Path) -> None:
    files = sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix not in (".tsv", ".md"))
    pdfs = [p for p in files if p.suffix.lower() == ".pdf"]
    pages, raw_seconds = raw_corpus(pdfs)
    wall, outcomes = asyncio.run(upload_all(url, headers, [(p.name, p.read_bytes()) for p in files]))
    raw_pps, stack_pps = pages / raw_seconds, pages / wall
    print(f"corpus: {len(files)} files ({len(pdfs)} PDFs, {pages} pages) uploaded at once in {wall:.2f} s")
    print(f"  outcomes: {', '.join(f'{k} {v}' for k, v in sorted(outcomes.items()))}")
    print(f"  raw PyMuPDF over the PDFs, one thread: {raw_pps:8.0f} pages/s  ({raw_seconds:.3f} s)")
    print(f"  the whole corpus at once, PDF pages over its wall time: {stack_pps:8.0f} pages/s")
    print(f"  corpus pages/s ÷ raw: {stack_pps / raw_pps:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ingest-only", action="store_true")
    parser.add_argument("--search-only", action="store_true")
    parser.add_argument("--passages", type=int, default=PASSAGES)
    parser.add_argument("--corpus", type=Path, help="a folder of real-world files to upload at once (item 3)")
    args = parser.parse_args()
    if args.corpus is not None and not args.corpus.is_dir():
        parser.error(f"--corpus {args.corpus}: not a folder")
    with tempfile.TemporaryDirectory(prefix="dossier-bench-") as home:
        stack = start_stack(Path(home) / "home")
        try:
            scope = f"bench{uuid.uuid4().hex[:6]}"
            token = stack.token(scope)
            headers = {"Authorization": f"Bearer {token}"}
            if not args.search_only:
                single = start_stack(Path(home) / "single", extra_env={"DOSSIER_EXTRACT_SPLIT_PAGES": "0"})
                try:
                    single_headers = {"Authorization": f"Bearer {single.token(scope)}"}
                    with (
                        httpx.Client(base_url=single.url, headers=single_headers, timeout=600) as one,
                        httpx.Client(base_url=stack.url, headers=headers, timeout=600) as split,
                    ):
                        with (
                            CpuMeter(stack_pids(single.local_home())) as single_meter,
                            CpuMeter(stack_pids(stack.local_home())) as split_meter,
                        ):
                            stacks = {"single": Ingesting(one, single_meter), "split": Ingesting(split, split_meter)}
                            ingest_benchmark(stacks, stack.dsn("assets"))
                            small_files_benchmark(stack.url, headers, split_meter)
                    parser_start_benchmark()
                finally:
                    stop_stack(single.proc)
            if args.corpus is not None:
                corpus_benchmark(stack.url, headers, args.corpus)
            if args.ingest_only:
                return 0
            search_benchmark(stack, token, scope, args.passages)
        finally:
            stop_stack(stack.proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
