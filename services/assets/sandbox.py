"""Parsing untrusted files in a separate, confined process with CPU, memory and wall-clock limits.

Parsers of hostile files crash, hang and balloon, so each file is parsed by its own short-lived process
(`python -m services.assets.parser`): RLIMIT_CPU and RLIMIT_AS are set before any parser is imported,
the parent kills it at the wall-clock deadline, and whatever happens to it is one failed version, never
a failed service. The child gets no secrets (a bare environment: PATH, the locale and the code's path),
cannot write files, and dies with its parent. Before it reads anything of its job it enters the
confinement of services.assets.confinement (another uid, no capabilities, no network, a file system of
its own, a seccomp allow-list) and says `["ready"]`; only then is the job sent: the input as an open
descriptor over the stdin socket, so the parser never needs a path of the service's file system.
Where the confinement cannot be set up, nothing is parsed: every version fails saying why, and the
service's health says so too (`problem`).

One spare process is kept warm (started, confined, PyMuPDF imported, waiting for its single job), so
neither the interpreter start nor the confinement is on the path of an upload. The child streams
passages as JSON lines; the parent hands them on as they come, so storing them overlaps with parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
from collections.abc import Awaitable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson

from services.assets import confinement
from services.assets.extract.base import Limits
from services.assets.output import STDERR_KEEP, ExtractionFailed, Parser, PassageSink, Stream
from services.assets.syscalls import Unconfinable

T = TypeVar("T")
log = logging.getLogger("dossier.assets.sandbox")
ROOT = Path(__file__).resolve().parents[2]
# One JSON line holds one passage; passages are bounded far below this.
_LINE_LIMIT = 16 * 1024 * 1024
# How long a new parser may take to confine itself and import the parsers before it counts as failed.
_START_SECONDS = 60.0


class SlotLender(Protocol):
    """Parser slots beyond a file's own (services.assets.queueing.FairSlots), for the shares of a split file."""

    def try_take(self) -> bool: ...  # a slot that is free with nobody waiting for it, else False

    def contended(self) -> bool: ...  # somebody waits for a slot

    def give_back(self) -> None: ...


class Sandbox:
    def __init__(
        self,
        limits: Limits,
        *,
        cpu_seconds: int,
        memory_bytes: int,
        wall_seconds: float,
        ocr_memory_bytes: int | None = None,
        split_pages: int = 0,
        split_width: int = 1,
    ):
        self.limits = limits
        # A PDF of this many pages or more is shared by up to `split_width` parsers (0: never).
        self.split_pages = split_pages
        self.split_width = max(1, split_width)
        self.cpu_seconds = cpu_seconds
        self.memory_bytes = memory_bytes
        # Only the OCR path lifts the child's soft limits to these (and its deadline by `limits.ocr_seconds`).
        self.ocr_memory_bytes = max(memory_bytes, ocr_memory_bytes or memory_bytes)
        self.wall_seconds = wall_seconds
        self._spare: asyncio.Task[Parser] | None = None
        # Warm parsers for the shares of a split file, beside the one spare of the next file.
        self._helpers: list[asyncio.Task[Parser]] = []
        self._reaping: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._plan: confinement.Plan | None = None
        # Why nothing can be parsed here (None: the parsers are confined); health reports it.
        self.problem: str | None = None
        try:
            self._plan = confinement.plan()
        except Unconfinable as exc:
            self.problem = str(exc)
            log.error("parsing is refused: %s", exc)

    def start(self) -> None:
        """Warm the first spare now, so health knows at once whether parsers can be confined here.

        The helpers for split files are warmed after the first file, not on the way to the service's start."""
        self._replenish(helpers=False)

    def _command(self, config: str) -> list[str]:
        return [sys.executable, "-B", "-m", "services.assets.parser", config]

    async def _spawn(self) -> Parser:
        """A new parser, confined and warm; raises ExtractionFailed (and records the problem) when it cannot be."""
        if self._plan is None:
            raise ExtractionFailed(f"parsing is refused: {self.problem}")
        config = {
            "cpu": self.cpu_seconds,
            "memory": self.memory_bytes,
            "ocr_memory": self.ocr_memory_bytes,
            "limits": asdict(self.limits),
            "confinement": self._plan.to_json(),
        }
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "PYTHONPATH": str(ROOT)}
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._command(json.dumps(config)),
                stdin=theirs.fileno(),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=ROOT,
                env=env,
                limit=_LINE_LIMIT,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        parser = Parser(proc, ours)
        assert proc.stdout is not None
        try:
            async with asyncio.timeout(_START_SECONDS):
                first = orjson.loads(await proc.stdout.readline() or b"null")
        except (TimeoutError, ValueError):
            first = None
        if first == ["ready"]:
            self.problem = None
            return parser
        reason = str(first[1]) if isinstance(first, list) and first[:1] == ["refused"] else None
        self._discard(parser, "a parser did not start" if reason is None else "a parser could not be confined")
        if reason is None:
            # A parser that died or hung before it was confined: nothing says the confinement is impossible.
            raise ExtractionFailed("the parser did not start")
        self.problem = f"the parser cannot be confined here: {reason}"
        log.error("parsing is refused: %s", self.problem)
        raise ExtractionFailed(f"parsing is refused: {self.problem}")

    def _discard(self, parser: Parser, why: str) -> None:
        """Stop a parser that never became ready, and log what it said on stderr."""
        parser.jobs.close()
        if parser.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                parser.proc.kill()

        async def reap() -> None:
            said = await _bounded(parser.proc.communicate(), "reaping a parser that never became ready")
            tail = said[1][-STDERR_KEEP:] if said and said[1] else b""
            log.warning("%s (exit %s); stderr: %s", why, parser.proc.returncode, tail.decode("utf-8", "replace"))

        task = asyncio.create_task(reap())
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def _take(self) -> Parser:
        spare, self._spare = self._spare, None
        parser: Parser | None = None
        if spare is not None:
            with contextlib.suppress(Exception):
                parser = await spare
        if parser is None or parser.proc.returncode is not None:
            if parser is not None:
                parser.jobs.close()
            parser = await self._spawn()
        return parser

    def _replenish(self, *, helpers: bool = True) -> None:
        # After the job, not during it: on a small machine the spare's start would slow the parse down.
        if self._closed or self._plan is None:
            return
        if self._spare is None:
            self._spare = asyncio.create_task(self._spawn())
        if helpers and self.split_pages > 0:
            while len(self._helpers) < self.split_width - 1:
                self._helpers.append(asyncio.create_task(self._spawn()))

    async def run(self, path: Path, kind: str, on_passage: PassageSink) -> dict[str, Any]:
        """Extract `path` in one parser; each passage goes to `on_passage`. Returns the coverage, or raises
        ExtractionFailed. (services.assets.splitting.extract_file reads a long PDF in several.)"""
        stream = Stream(self, await self._take(), on_passage)
        try:
            async with asyncio.timeout(self.wall_seconds) as deadline:
                stream.deadline = deadline
                _send_job(stream.parser.jobs, path, kind)
                stream.parser.jobs.close()
                await stream.follow()
        except TimeoutError as exc:
            raise stream.timed_out() from exc
        finally:
            await stream.end()
            self._replenish()
        return stream.result()

    def helpers_ready(self) -> int:
        """Warm parsers ready for the shares of a split file."""
        return sum(1 for task in self._helpers if task.done() and not task.cancelled() and not task.exception())

    async def take_helper(self) -> Parser:
        """A parser for a share of a split file: a warm helper when one is ready, else a new one."""
        while self._helpers:
            task = self._helpers.pop(0)
            with contextlib.suppress(Exception):
                parser = await task
                if parser.proc.returncode is None:
                    return parser
                parser.jobs.close()
        return await self._spawn()

    async def reap(self, proc: asyncio.subprocess.Process, stderr: asyncio.Task[bytes]) -> bytes | None:
        # Bounded: a parser that cannot be reaped, or a pipe that never closes, must not hang the service.
        await _bounded(proc.wait(), "reaping the parser")
        return await _bounded(stderr, "reading the parser's stderr")

    def reap_beside(self, proc: asyncio.subprocess.Process, stderr: asyncio.Task[bytes]) -> None:
        task = asyncio.create_task(self.reap(proc, stderr))
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def close(self) -> None:
        self._closed = True
        await asyncio.gather(*self._reaping, return_exceptions=True)
        spares = [self._spare] if self._spare is not None else []
        spares, self._spare, self._helpers = [*spares, *self._helpers], None, []
        for spare in spares:
            with contextlib.suppress(Exception):
                parser = await spare
                await self.discard_ready(parser)

    def discard_when_ready(self, starting: asyncio.Future[Parser]) -> None:
        """Stop a parser that is still starting for a share no longer needed, once it has started."""

        def started(done: asyncio.Future[Parser]) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            task = asyncio.create_task(self.discard_ready(done.result()))
            self._reaping.add(task)
            task.add_done_callback(self._reaping.discard)

        starting.add_done_callback(started)

    async def discard_ready(self, parser: Parser) -> None:
        """Stop a ready parser that got no job (a spare at close, a share no longer needed)."""
        parser.jobs.close()
        if parser.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                parser.proc.kill()
        await _bounded(parser.proc.communicate(), "reaping a parser that got no job")


def _send_job(jobs: socket.socket, path: Path, kind: str, *, split: int = 0) -> None:
    """The job and its input's open descriptor, in one message (a few bytes: the socket never blocks).

    The staged file sits in a 0700 per-job folder the parser cannot reach; the parser opens the input again
    through its descriptor (`/proc/self/fd/N`), which checks the file's mode against the parser's uid, so
    the file itself is made readable."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fchmod(fd, 0o644)
        # `split`: the pages from which a PDF is shared (services.assets.splitting).
        job: dict[str, Any] = {"kind": kind, "split": split} if split else {"kind": kind}
        socket.send_fds(jobs, [json.dumps(job).encode()], [fd])
    finally:
        os.close(fd)


async def _bounded(awaitable: Awaitable[T], what: str, seconds: float = 10.0) -> T | None:
    task = asyncio.ensure_future(awaitable)
    try:
        async with asyncio.timeout(seconds):
            return await asyncio.shield(task)
    except TimeoutError:
        task.cancel()
        log.warning("gave up %s after %.0f s", what, seconds)
        return None
