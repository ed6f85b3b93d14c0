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

One spare process is kept warm (started, confined, parsers imported, waiting for its single job), so
neither the interpreter start nor the confinement is on the path of an upload. The child streams
passages as JSON lines; the parent hands them on as they come, so storing them overlaps with parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

from services.assets import confinement
from services.assets.extraction import Limits

T = TypeVar("T")
log = logging.getLogger("dossier.assets.sandbox")
ROOT = Path(__file__).resolve().parents[2]
# One JSON line holds one passage; passages are bounded far below this.
_LINE_LIMIT = 16 * 1024 * 1024
_STDERR_KEEP = 4096
# How long a new parser may take to confine itself and import the parsers before it counts as failed.
_START_SECONDS = 60.0

# A passage: locator, text, and {"ocr": bool} as the parser said.
PassageSink = Callable[[str, str, dict[str, Any]], Awaitable[None]]


class ExtractionFailed(Exception):
    """The file failed alone; the message is safe to show (no paths, no traces)."""


@dataclass
class _Parser:
    proc: asyncio.subprocess.Process
    # The service's end of the child's stdin: the job (and its input's descriptor) goes through it.
    jobs: socket.socket


class Sandbox:
    def __init__(
        self,
        limits: Limits,
        *,
        cpu_seconds: int,
        memory_bytes: int,
        wall_seconds: float,
        ocr_memory_bytes: int | None = None,
    ):
        self.limits = limits
        self.cpu_seconds = cpu_seconds
        self.memory_bytes = memory_bytes
        # Only the OCR path lifts the child's soft limits to these (and its deadline by `limits.ocr_seconds`).
        self.ocr_memory_bytes = max(memory_bytes, ocr_memory_bytes or memory_bytes)
        self.wall_seconds = wall_seconds
        self._spare: asyncio.Task[_Parser] | None = None
        self._reaping: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._plan: confinement.Plan | None = None
        # Why nothing can be parsed here (None: the parsers are confined); health reports it.
        self.problem: str | None = None
        try:
            self._plan = confinement.plan()
        except confinement.Unconfinable as exc:
            self.problem = str(exc)
            log.error("parsing is refused: %s", exc)

    def start(self) -> None:
        """Warm the first spare now, so health knows at once whether parsers can be confined here."""
        self._replenish()

    def _command(self, config: str) -> list[str]:
        return [sys.executable, "-B", "-m", "services.assets.parser", config]

    async def _spawn(self) -> _Parser:
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
        parser = _Parser(proc, ours)
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

    def _discard(self, parser: _Parser, why: str) -> None:
        """Stop a parser that never became ready, and log what it said on stderr."""
        parser.jobs.close()
        if parser.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                parser.proc.kill()

        async def reap() -> None:
            said = await _bounded(parser.proc.communicate(), "reaping a parser that never became ready")
            tail = said[1][-_STDERR_KEEP:] if said and said[1] else b""
            log.warning("%s (exit %s); stderr: %s", why, parser.proc.returncode, tail.decode("utf-8", "replace"))

        task = asyncio.create_task(reap())
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def _take(self) -> _Parser:
        spare, self._spare = self._spare, None
        parser: _Parser | None = None
        if spare is not None:
            with contextlib.suppress(Exception):
                parser = await spare
        if parser is None or parser.proc.returncode is not None:
            if parser is not None:
                parser.jobs.close()
            parser = await self._spawn()
        return parser

    def _replenish(self) -> None:
        # After the job, not during it: on a small machine the spare's start would slow the parse down.
        if not self._closed and self._spare is None and self._plan is not None:
            self._spare = asyncio.create_task(self._spawn())

    async def run(self, path: Path, kind: str, on_passage: PassageSink) -> dict[str, Any]:
        """Extract `path`; each passage goes to `on_passage`. Returns the coverage, or raises ExtractionFailed."""
        parser = await self._take()
        proc = parser.proc
        assert proc.stdout is not None and proc.stderr is not None
        stderr = asyncio.create_task(_tail(proc.stderr))
        final: list[Any] | None = None
        passages = 0
        ocr_started = False
        try:
            async with asyncio.timeout(self.wall_seconds) as deadline:
                _send_job(parser.jobs, path, kind)
                parser.jobs.close()
                while line := await proc.stdout.readline():
                    record = _record(line)
                    if record[0] == "ocr":
                        # Once per file: OCR has its own time budget on top of the parse's.
                        if not ocr_started and (when := deadline.when()) is not None:
                            deadline.reschedule(when + self.limits.ocr_seconds)
                        ocr_started = True
                    elif record[0] == "p":
                        passages += 1
                        if passages > self.limits.max_passages:
                            raise ExtractionFailed("the parser produced more passages than the limit allows")
                        meta = record[3] if len(record) == 4 else {}
                        await on_passage(record[1], record[2], meta)
                    else:
                        final = record
                        break  # "done" or "error": the parser has said all it will say
                if final is None:
                    await proc.wait()
        except TimeoutError as exc:
            allowed = self.wall_seconds + (self.limits.ocr_seconds if ocr_started else 0)
            raise ExtractionFailed(f"the parser did not finish within {allowed:g} s and was stopped") from exc
        finally:
            parser.jobs.close()
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            tail = b""
            if final is None:
                tail = await self._reap(proc, stderr) or b""
            else:
                # The parser has answered: its exit (unmapping all it allocated) is not waited for on the way
                # to storing and activating; it is reaped beside that.
                task = asyncio.create_task(self._reap(proc, stderr))
                self._reaping.add(task)
                task.add_done_callback(self._reaping.discard)
            self._replenish()
        if final is not None and final[0] == "done":
            return dict(final[1])
        if final is not None and final[0] == "error":
            raise ExtractionFailed(str(final[1]))
        log.warning("the sandbox exited with %s; stderr: %s", proc.returncode, tail.decode("utf-8", "replace"))
        raise ExtractionFailed(_death(proc.returncode))

    async def _reap(self, proc: asyncio.subprocess.Process, stderr: asyncio.Task[bytes]) -> bytes | None:
        # Bounded: a parser that cannot be reaped, or a pipe that never closes, must not hang the service.
        await _bounded(proc.wait(), "reaping the parser")
        return await _bounded(stderr, "reading the parser's stderr")

    async def close(self) -> None:
        self._closed = True
        await asyncio.gather(*self._reaping, return_exceptions=True)
        spare, self._spare = self._spare, None
        if spare is None:
            return
        with contextlib.suppress(Exception):
            parser = await spare
            parser.jobs.close()
            if parser.proc.returncode is None:
                parser.proc.kill()
            await _bounded(parser.proc.communicate(), "reaping the spare parser")


def _send_job(jobs: socket.socket, path: Path, kind: str) -> None:
    """The job and its input's open descriptor, in one message (a few bytes: the socket never blocks).

    The staged file sits in a 0700 per-job folder the parser cannot reach; the parser opens the input again
    through its descriptor (`/proc/self/fd/N`), which checks the file's mode against the parser's uid, so
    the file itself is made readable."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fchmod(fd, 0o644)
        socket.send_fds(jobs, [json.dumps({"kind": kind}).encode()], [fd])
    finally:
        os.close(fd)


def _record(line: bytes) -> list[Any]:
    try:
        record = orjson.loads(line)
    except ValueError as exc:
        raise ExtractionFailed("the parser's output was malformed") from exc
    if record == ["ocr"]:
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
    return record


def _death(code: int | None) -> str:
    if code == -signal.SIGXCPU or code == -signal.SIGKILL:
        return "the parser was stopped at its CPU or memory limit"
    if code is not None and code < 0:
        return f"the parser crashed (signal {signal.Signals(-code).name})"
    return f"the parser failed (exit status {code})"


async def _bounded(awaitable: Awaitable[T], what: str, seconds: float = 10.0) -> T | None:
    task = asyncio.ensure_future(awaitable)
    try:
        async with asyncio.timeout(seconds):
            return await asyncio.shield(task)
    except TimeoutError:
        task.cancel()
        log.warning("gave up %s after %.0f s", what, seconds)
        return None


async def _tail(stream: asyncio.StreamReader) -> bytes:
    kept = b""
    while chunk := await stream.read(65536):
        kept = (kept + chunk)[-_STDERR_KEEP:]
    return kept
