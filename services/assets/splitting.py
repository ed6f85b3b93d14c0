"""One PDF on several cores: blocks of pages shared by confined parsers, merged in page order.

The file's own parser (the one its parser slot pays for) opens the PDF and says how many pages it will read,
and whether its first page is a scan (read by OCR). Below `split_pages` a file that is not a scan is read
whole, as without a split. Otherwise the service borrows the parser slots that are free with nobody waiting
(`SlotLender`), each for one more parser (warm, confined like any other: services.assets.parser), and hands
out blocks of `BLOCK_PAGES` pages in page order, each parser holding at most `AHEAD` of them; a scan, where
a page costs seconds, goes out a page at a time, one to each parser. Every parser opens the same file (its
own descriptor) and answers a block with its passages and a tally. The service keeps the passages of a block
until every block before it is in, then hands them on, so passages reach the store in page order as they do
from one parser.

OCR: the service holds the file's OCR budget (pages and seconds) and hands each block a share of what is
neither spent nor promised to an earlier block still out: at most one page per page of the block, and the
seconds in proportion. A block answers with what it spent, and what it did not spend is free again. The
pages are counted exactly as one parser counts them; the seconds are known only once spent, so where one
parser may overrun them by the page it is reading, several may each overrun them by theirs.

What one parser decides from the pages before a page is never guessed: a block stops at the first page that
needs more OCR than its share, that the collector refuses (its limits count the whole file), or after which
MuPDF repaired the file; the merge stops where the file's passage or character limit could be reached, and
where a parser died, failed or lied. From the first such page (or past the last page) the file's own parser
reads on alone with the state one parser would have there (`pdf.Seed`): the collector's counts, the
unreadable, blank and OCR-empty pages, the OCR pages and seconds spent, the CPU time the others spent on
anything but OCR. So passages, locators and coverage are those of one parser (the OCR note's seconds aside,
which no two runs share), and a crash, a timeout or an error on a page ends the file as it did.

Fairness: a borrowed slot is given back at its parser's next block boundary once any file (of any scope)
waits, so a big file delays another scope's file by at most a block or two; a slot is never waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.assets.extract.pdf import Seed
from services.assets.output import ExtractionFailed, PassageSink, Stream, death
from services.assets.sandbox import Sandbox, SlotLender, _send_job
from shared.metrics import EXTRACTION_HELPERS

BLOCK_PAGES = 16
AHEAD = 2
_TALLY_INTS = ("passages", "chars", "offered", "cut", "ocr_pages")


@dataclass
class _Share:
    stream: Stream
    primary: bool
    reader: asyncio.Task[None] | None = None
    blocks: deque[int] = field(default_factory=deque)
    held: list[list[Any]] = field(default_factory=list)
    ready: bool = False
    alive: bool = True
    lent: bool = False  # holds a borrowed slot
    resting: bool = False  # reads the rest of the file
    cpu: float = 0.0  # CPU seconds the parser had used at its last block
    ocr: float = 0.0  # seconds of it its blocks spent on OCR
    answered: int = 0  # blocks


class Split:
    def __init__(self, sandbox: Sandbox, path: Path, sink: PassageSink, lender: SlotLender):
        self.sandbox, self.path, self.sink, self.lender = sandbox, path, sink, lender
        self.limits = sandbox.limits
        self.counted = [0]
        self.events: asyncio.Queue[tuple[_Share, list[Any] | None]] = asyncio.Queue()
        self.shares: list[_Share] = []
        self.joining: set[asyncio.Task[None]] = set()
        self.pages = 0
        self.scan = False
        self.blocks: list[tuple[int, int]] = []
        # The file's OCR budget as blocks spent it or hold a share of it (pages, seconds), and each held share.
        self.ocr_pages, self.ocr_seconds = 0, 0.0
        self.ocr_shares: dict[int, tuple[int, float]] = {}
        self.handed = 0  # blocks handed out
        self.merged = 0  # blocks merged
        self.done: dict[int, tuple[list[list[Any]], dict[str, Any]]] = {}
        self.cut_at: int | None = None  # from this page on, the rest is read by one parser
        self.seed = Seed()
        self.phase = "blocks"
        self.resting: _Share | None = None

    async def run(self) -> dict[str, Any]:
        sandbox = self.sandbox
        main = _Share(Stream(sandbox, await sandbox._take(), self.sink, counted=self.counted), primary=True)
        self.shares.append(main)
        try:
            async with asyncio.timeout(sandbox.wall_seconds) as deadline:
                main.stream.deadline = deadline
                _send_job(main.stream.parser.jobs, self.path, "pdf", split=self.sandbox.split_pages)
                first = await main.stream.next_record()
                pages = first[1] if first is not None and first[0] == "pages" else None
                if first is None or pages is None:
                    main.stream.parser.jobs.close()
                    await main.stream.follow(first)  # not a file to split: it was read whole
                    return main.stream.result()
                if not isinstance(pages, int) or not 0 < pages <= self.limits.max_parts:
                    raise ExtractionFailed("the parser's output was malformed")
                self.pages, self.scan = pages, first[2]
                if pages < sandbox.split_pages and not (self.scan and pages > 1):
                    self._rest(main)  # when it died instead, its end says how
                    await main.stream.follow()
                    return main.stream.result()
                return await self._shared(main, deadline)
        except TimeoutError as exc:
            # The file's own stream holds the file's deadline and whether OCR moved it.
            raise main.stream.timed_out() from exc
        finally:
            await self._end()

    async def _shared(self, main: _Share, deadline: asyncio.Timeout) -> dict[str, Any]:
        size = 1 if self.scan else BLOCK_PAGES
        self.blocks = [(a, min(a + size - 1, self.pages)) for a in range(1, self.pages + 1, size)]
        main.ready = True
        self._listen(main)
        self._feed(main)
        for _ in range(self.sandbox.split_width - 1):
            if not self.lender.try_take():
                break
            task = asyncio.create_task(self._join())
            self.joining.add(task)
            task.add_done_callback(self.joining.discard)
        while True:
            share, record = await self.events.get()
            if share is self.resting and not share.blocks:
                if record is None or record[0] in ("done", "error", "failed"):
                    return await self._conclude(share, record)
                if record[0] == "ocr":
                    self._note_ocr()
                elif record[0] == "p":
                    await share.stream.pass_on(record)
                else:
                    raise ExtractionFailed("the parser's output was malformed")
                continue
            await self._on_record(share, record)
            if self.resting is None and self._merged_all():
                self.resting = await self._hand_over(main, deadline)

    def _listen(self, share: _Share) -> None:
        async def read() -> None:
            try:
                while (record := await share.stream.next_record()) is not None:
                    await self.events.put((share, record))
                    if record[0] in ("done", "error"):
                        return
            except ExtractionFailed as exc:
                await self.events.put((share, ["failed", str(exc)]))
                return
            await share.stream.parser.proc.wait()
            await self.events.put((share, None))

        share.reader = asyncio.create_task(read())

    async def _join(self) -> None:
        """One more parser, on a borrowed slot: it takes blocks once it has opened the file too."""
        taking = asyncio.ensure_future(self.sandbox.take_helper())
        try:
            parser = await asyncio.shield(taking)
        except asyncio.CancelledError:
            # The file ended first: the slot goes back now, the parser (once started) is stopped.
            self.lender.give_back()
            self.sandbox.discard_when_ready(taking)
            raise
        except Exception:
            self.lender.give_back()
            return
        if self.phase != "blocks" or not self._wanted():
            self.lender.give_back()
            await self.sandbox.discard_ready(parser)
            return
        share = _Share(Stream(self.sandbox, parser, self.sink, counted=self.counted), primary=False, lent=True)
        self.shares.append(share)
        try:
            _send_job(parser.jobs, self.path, "pdf", split=self.sandbox.split_pages)
        except OSError:
            self._dismiss(share)
            return
        self._listen(share)

    def _wanted(self) -> bool:
        return not self.lender.contended() and self._next_block() is not None

    def _next_block(self) -> int | None:
        if self.handed >= len(self.blocks):
            return None
        if self.cut_at is not None and self.blocks[self.handed][0] >= self.cut_at:
            return None
        return self.handed

    def _feed(self, share: _Share) -> None:
        if not share.alive or not share.ready or self.phase != "blocks":
            return
        if not share.primary and not self._wanted():
            if not share.blocks:
                self._dismiss(share)
            return
        while len(share.blocks) < (1 if self.scan else AHEAD) and (index := self._next_block()) is not None:
            ocr = self._ocr_share(*self.blocks[index])
            if not self._send(share, {"block": list(self.blocks[index]), "ocr": list(ocr)}):
                return
            share.blocks.append(index)
            self.handed += 1
            self.ocr_shares[index] = ocr
            self.ocr_pages += ocr[0]
            self.ocr_seconds += ocr[1]

    def _ocr_share(self, first: int, last: int) -> tuple[int, float]:
        """What a block may spend on OCR: of the budget neither spent nor held by another block, at most a
        page per page of the block, and the seconds in proportion to the pages."""
        pages = self.limits.ocr_max_pages - self.ocr_pages
        seconds = self.limits.ocr_seconds - self.ocr_seconds
        if pages <= 0 or seconds <= 0:
            return 0, 0.0
        share = min(pages, last - first + 1)
        return share, seconds * share / pages

    def _note_ocr(self) -> None:
        """OCR has its own time on top of the parse's: the file's deadline, which the file's own stream holds,
        moves once, whichever parser starts it."""
        self.shares[0].stream.note_ocr()

    def _send(self, share: _Share, message: dict[str, Any]) -> bool:
        try:
            share.stream.parser.jobs.sendall(json.dumps(message).encode() + b"\n")
        except OSError:
            return False  # it died; its end of output says so
        return True

    async def _on_record(self, share: _Share, record: list[Any] | None) -> None:
        kind = None if record is None else record[0]
        if not share.alive:
            return
        if kind == "ocr":
            self._note_ocr()
        elif kind == "pages" and not share.ready and not share.primary:
            if record is None or record[1:] != [self.pages, self.scan]:
                self._fail(share)
                return
            share.ready = True
            self._feed(share)
        elif kind == "p" and share.blocks and record is not None:
            share.held.append(record)
            if len(share.held) > self.limits.max_passages:
                self._fail(share)
        elif kind == "block" and share.blocks and record is not None:
            index = share.blocks.popleft()
            tally = self._tally(record[1], *self.blocks[index], len(share.held), self.ocr_shares[index])
            if tally is None:
                share.blocks.appendleft(index)
                self._fail(share)
                return
            if not share.primary and not share.answered:
                EXTRACTION_HELPERS.inc()
            share.answered += 1
            share.cpu = float(tally["cpu"])
            share.ocr += tally["ocr_seconds"]
            # What the block did not spend of its share is free for the blocks after it.
            held_pages, held_seconds = self.ocr_shares.pop(index)
            self.ocr_pages += tally["ocr_pages"] - held_pages
            self.ocr_seconds += tally["ocr_seconds"] - held_seconds
            self.done[index] = (share.held, tally)
            share.held = []
            await self._merge()
            self._feed(share)
        else:
            self._fail(share)  # died, failed, or said what a share does not say

    def _fail(self, share: _Share) -> None:
        """A share that died or lied: from its first unanswered block on, the rest is read by one parser."""
        if share.blocks:
            self._cut(self.blocks[share.blocks[0]][0])
        elif share.primary and self.handed < len(self.blocks):
            self._cut(self.blocks[self.handed][0])
        share.blocks.clear()
        share.held = []
        share.alive = False
        if not share.primary:
            self._dismiss(share)

    def _dismiss(self, share: _Share) -> None:
        share.alive = False
        share.stream.parser.jobs.close()
        if share.stream.parser.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                share.stream.parser.proc.kill()
        if share.lent:
            share.lent = False
            self.lender.give_back()

    def _cut(self, page: int) -> None:
        self.cut_at = page if self.cut_at is None else min(self.cut_at, page)

    def _tally(self, tally: Any, first: int, last: int, held: int, ocr: tuple[int, float]) -> dict[str, Any] | None:
        """A block's tally, checked: whatever a parser says is a claim about its own file, but well formed,
        and within the OCR share the block was given."""
        if not isinstance(tally, dict):
            return None
        stop = tally.get("stop")
        if stop is not None and not (isinstance(stop, int) and first <= stop <= last):
            return None
        end = last + 1 if stop is None else stop
        if not all(isinstance(tally.get(k), int) and tally[k] >= 0 for k in _TALLY_INTS) or tally["passages"] != held:
            return None
        for key in ("unreadable", "blank", "no_text"):
            pages = tally.get(key)
            if not isinstance(pages, list) or not all(isinstance(n, int) and first <= n < end for n in pages):
                return None
        for key in ("cpu", "ocr_seconds"):
            if not isinstance(tally.get(key), int | float) or tally[key] < 0:
                return None
        if tally["ocr_pages"] > ocr[0]:
            return None
        return tally

    async def _merge(self) -> None:
        """Hand on every block whose predecessors are all in, until the first page one parser must read on."""
        seed, limits = self.seed, self.limits
        while self.merged in self.done:
            first, last = self.blocks[self.merged]
            if self.cut_at is not None and first >= self.cut_at:
                return
            held, tally = self.done.pop(self.merged)
            # Within the file's limits whatever the order of the adds: the collector could not refuse any.
            if (
                seed.passages + tally["passages"] > limits.max_passages
                or seed.chars + tally["offered"] > limits.max_text_chars
            ):
                self._cut(first)
                return
            for record in held:
                await self.sink(record[1], record[2], record[3] if len(record) == 4 else {})
            self.counted[0] += len(held)
            seed.passages += tally["passages"]
            seed.chars += tally["chars"]
            seed.cut += tally["cut"]
            end = last + 1 if tally["stop"] is None else tally["stop"]
            seed.extracted += end - first - len(set(tally["unreadable"]))
            seed.unreadable += sorted(set(tally["unreadable"]))
            seed.blank += sorted(set(tally["blank"]))
            seed.no_text += sorted(set(tally["no_text"]))
            seed.ocr_pages += tally["ocr_pages"]
            seed.ocr_seconds += tally["ocr_seconds"]
            seed.start = end
            self.merged += 1
            if tally["stop"] is not None:
                self._cut(tally["stop"])
                return

    def _merged_all(self) -> bool:
        if self.merged >= len(self.blocks):
            return True
        return self.cut_at is not None and self.blocks[self.merged][0] >= self.cut_at

    async def _hand_over(self, main: _Share, deadline: asyncio.Timeout) -> _Share:
        """The rest of the file, from `cut_at` (or past the last page), to one parser with the merged state."""
        self.phase = "rest"
        self.seed.start = self.cut_at if self.cut_at is not None else self.pages + 1
        for share in self.shares:
            if not share.primary and share.alive:
                self._dismiss(share)
        others = [s for s in self.shares if s is not main]
        if main.alive and self._rest(main, others):
            return main
        main.alive = False
        # The file's own parser died: a new one takes over on its slot, as the file's parser.
        parser = await self.sandbox.take_helper()
        rest = _Share(Stream(self.sandbox, parser, self.sink, counted=self.counted), primary=True)
        rest.stream.deadline = deadline
        self.shares.append(rest)
        _send_job(parser.jobs, self.path, "pdf", split=self.sandbox.split_pages)
        first = await rest.stream.next_record()
        if first is None:
            raise ExtractionFailed(death(await parser.proc.wait()))
        if first != ["pages", self.pages, self.scan]:
            raise ExtractionFailed("the parser's output was malformed")
        self._listen(rest)
        if not self._rest(rest, [s for s in self.shares if s is not rest]):
            raise ExtractionFailed(death(await rest.stream.parser.proc.wait()))
        return rest

    def _rest(self, share: _Share, others: list[_Share] | None = None) -> bool:
        """Send `share` the rest of the file; False when it is no longer there to take it."""
        # OCR's seconds have a budget of their own (the seed carries what was spent).
        spent = sum(max(0.0, s.cpu - s.ocr) for s in others or [])
        left = int(self.sandbox.cpu_seconds - spent)
        if left < 1:
            raise ExtractionFailed(death(-9))
        share.resting = True
        if not self._send(share, {"rest": asdict(self.seed), "cpu": left}):
            return False
        share.stream.parser.jobs.shutdown(socket.SHUT_WR)
        return True

    async def _conclude(self, share: _Share, record: list[Any] | None) -> dict[str, Any]:
        if record is not None and record[0] == "failed":
            raise ExtractionFailed(str(record[1]))
        share.stream.final = record
        if record is None:
            share.stream.tail = await self.sandbox.reap(share.stream.parser.proc, share.stream.stderr) or b""
        return share.stream.result()

    async def _end(self) -> None:
        for task in list(self.joining):
            task.cancel()
        await asyncio.gather(*self.joining, return_exceptions=True)
        for share in self.shares:
            if share.reader is not None:
                share.reader.cancel()
            if share.lent:
                share.lent = False
                self.lender.give_back()
        await asyncio.gather(*(s.reader for s in self.shares if s.reader is not None), return_exceptions=True)
        for share in self.shares:
            await share.stream.end()
        self.sandbox._replenish()


async def extract_file(
    sandbox: Sandbox, path: Path, kind: str, on_passage: PassageSink, lender: SlotLender
) -> dict[str, Any]:
    """A file through the sandbox: a PDF of `split_pages` pages or more is read by as many parsers as
    `lender` lends free slots, anything else by one parser."""
    if kind == "pdf" and sandbox.split_pages > 0:
        return await Split(sandbox, path, on_passage, lender).run()
    return await sandbox.run(path, kind, on_passage)
