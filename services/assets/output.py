"""A parser's output as the service follows it (services.assets.sandbox starts the parser).

JSON lines: `["p", locator, text, meta]` per passage, `["ocr"]` once OCR starts, `["done", coverage]` or
`["error", message]` at the end; a share of a split PDF also says `["pages", n, scanned]` and `["block", tally]`
(services.assets.splitting). A line that is none of these is malformed, and fails the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from services.assets.extract.base import Limits

log = logging.getLogger("dossier.assets.sandbox")
STDERR_KEEP = 4096


# A passage: locator, text, and {"ocr": bool} as the parser said.
PassageSink = Callable[[str, str, dict[str, Any]], Awaitable[None]]


@dataclass
class Parser:
    """A started parser process, as the service holds it."""

    proc: asyncio.subprocess.Process
    # The service's end of the child's stdin: the job (and its input's descriptor) goes through it.
    jobs: socket.socket


class ParserHost(Protocol):
    """What a stream needs of the sandbox that started its parser (services.assets.sandbox.Sandbox)."""

    limits: Limits
    wall_seconds: float

    async def reap(self, proc: asyncio.subprocess.Process, stderr: asyncio.Task[bytes]) -> bytes | None: ...

    def reap_beside(self, proc: asyncio.subprocess.Process, stderr: asyncio.Task[bytes]) -> None: ...


class ExtractionFailed(Exception):
    """The file failed alone; the message is safe to show (no paths, no traces)."""


class Stream:
    """One parser's output as the service follows it: passages to the sink, its final record, its death."""

    def __init__(self, sandbox: ParserHost, parser: Parser, sink: PassageSink, *, counted: list[int] | None = None):
        self.sandbox, self.parser, self.sink = sandbox, parser, sink
        assert parser.proc.stdout is not None and parser.proc.stderr is not None
        self.stderr = asyncio.create_task(tail_of(parser.proc.stderr))
        self.final: list[Any] | None = None
        # Passages handed on for the file (shared by the parsers of a split file).
        self.counted = counted if counted is not None else [0]
        self.ocr_started = False
        self.deadline: asyncio.Timeout | None = None
        self.tail = b""

    async def next_record(self) -> list[Any] | None:
        """The parser's next record, or None once its output has ended."""
        assert self.parser.proc.stdout is not None
        line = await self.parser.proc.stdout.readline()
        return _record(line) if line else None

    def note_ocr(self) -> None:
        # Once per file: OCR has its own time budget on top of the parse's.
        if not self.ocr_started and self.deadline is not None and (when := self.deadline.when()) is not None:
            self.deadline.reschedule(when + self.sandbox.limits.ocr_seconds)
        self.ocr_started = True

    async def pass_on(self, record: list[Any]) -> None:
        self.counted[0] += 1
        if self.counted[0] > self.sandbox.limits.max_passages:
            raise ExtractionFailed("the parser produced more passages than the limit allows")
        await self.sink(record[1], record[2], record[3] if len(record) == 4 else {})

    async def follow(self, record: list[Any] | None = None) -> None:
        """Hand passages on until the parser's final record (or its end); `record` is one already read."""
        if record is None:
            record = await self.next_record()
        while record is not None:
            if record[0] == "ocr":
                self.note_ocr()
            elif record[0] == "p":
                await self.pass_on(record)
            elif record[0] in ("done", "error"):
                self.final = record
                return  # the parser has said all it will say
            else:
                raise ExtractionFailed("the parser's output was malformed")
            record = await self.next_record()
        await self.parser.proc.wait()

    def timed_out(self) -> ExtractionFailed:
        allowed = self.sandbox.wall_seconds + (self.sandbox.limits.ocr_seconds if self.ocr_started else 0)
        return ExtractionFailed(f"the parser did not finish within {allowed:g} s and was stopped")

    async def end(self) -> None:
        """Stop the parser if it still runs and reap it: at once when it has not answered, else beside."""
        proc = self.parser.proc
        self.parser.jobs.close()
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        if self.final is None:
            self.tail = await self.sandbox.reap(proc, self.stderr) or b""
            return
        # The parser has answered: its exit (unmapping all it allocated) is not waited for on the way to
        # storing and activating; it is reaped beside that.
        self.sandbox.reap_beside(proc, self.stderr)

    def result(self) -> dict[str, Any]:
        final, proc = self.final, self.parser.proc
        if final is not None and final[0] == "done":
            if not isinstance(final[1], dict):
                raise ExtractionFailed("the parser's output was malformed")
            return dict(final[1])
        if final is not None and final[0] == "error":
            raise ExtractionFailed(str(final[1]))
        log.warning("the sandbox exited with %s; stderr: %s", proc.returncode, self.tail.decode("utf-8", "replace"))
        raise ExtractionFailed(death(proc.returncode))


def _record(line: bytes) -> list[Any]:
    try:
        record = orjson.loads(line)
    except ValueError as exc:
        raise ExtractionFailed("the parser's output was malformed") from exc
    if record == ["ocr"]:
        return ["ocr"]
    # A part of a split file (services.assets.splitting) says its pages and each block's tally.
    if isinstance(record, list) and len(record) == 2 and record[0] == "block":
        return record
    if isinstance(record, list) and len(record) == 3 and record[0] == "pages" and isinstance(record[2], bool):
        return record
    valid = isinstance(record, list) and len(record) in (2, 3, 4) and record[0] in ("p", "done", "error")
    passage = valid and record[0] == "p"
    if passage and not (
        len(record) in (3, 4)
        and all(isinstance(x, str) for x in record[1:3])
        and (len(record) == 3 or isinstance(record[3], dict))
    ):
        valid = False
    if not valid or (record[0] != "p" and len(record) == 4):
        raise ExtractionFailed("the parser's output was malformed")
    return list(record)


def death(code: int | None) -> str:
    if code == -signal.SIGXCPU or code == -signal.SIGKILL:
        return "the parser was stopped at its CPU or memory limit"
    if code is not None and code < 0:
        return f"the parser crashed (signal {signal.Signals(-code).name})"
    return f"the parser failed (exit status {code})"


async def tail_of(stream: asyncio.StreamReader) -> bytes:
    kept = b""
    while chunk := await stream.read(65536):
        kept = (kept + chunk)[-STDERR_KEEP:]
    return kept
