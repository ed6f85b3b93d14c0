"""Parsing untrusted files in a separate process with CPU, memory and wall-clock limits.

Parsers of hostile files crash, hang and balloon, so each file is parsed by its own short-lived process
(`python -m services.assets.sandbox`): RLIMIT_CPU and RLIMIT_AS are set before any parser is imported,
the parent kills it at the wall-clock deadline, and whatever happens to it is one failed version, never
a failed service. The child gets no secrets (a bare environment: PATH, the locale and the code's path),
no network (its own network namespace on Linux), cannot start processes or write files, and dies with
its parent.

One spare process is kept warm (started, limits set, parsers imported, waiting for its single job on
stdin), so the interpreter start is not on the path of an upload. The child streams passages as JSON
lines; the parent hands them on as they come, so storing them overlaps with parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import orjson

from services.assets.extraction import Limits

T = TypeVar("T")
log = logging.getLogger("dossier.assets.sandbox")
ROOT = Path(__file__).resolve().parents[2]
# One JSON line holds one passage; passages are bounded far below this.
_LINE_LIMIT = 16 * 1024 * 1024
_STDERR_KEEP = 4096
_OUT_BUFFER = 32 * 1024

# A passage: locator, text, and {"ocr": bool} as the parser said.
PassageSink = Callable[[str, str, dict[str, Any]], Awaitable[None]]


class ExtractionFailed(Exception):
    """The file failed alone; the message is safe to show (no paths, no traces)."""


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
        self._spare: asyncio.Task[asyncio.subprocess.Process] | None = None
        self._reaping: set[asyncio.Task[bytes | None]] = set()
        self._closed = False

    async def _spawn(self) -> asyncio.subprocess.Process:
        config = {
            "cpu": self.cpu_seconds,
            "memory": self.memory_bytes,
            "ocr_memory": self.ocr_memory_bytes,
            "limits": asdict(self.limits),
        }
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "PYTHONPATH": str(ROOT)}
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-B",
            "-m",
            "services.assets.sandbox",
            json.dumps(config),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=ROOT,
            env=env,
            limit=_LINE_LIMIT,
        )

    async def _take(self) -> asyncio.subprocess.Process:
        spare, self._spare = self._spare, None
        proc: asyncio.subprocess.Process | None = None
        if spare is not None:
            with contextlib.suppress(Exception):
                proc = await spare
        if proc is None or proc.returncode is not None:
            proc = await self._spawn()
        return proc

    def _replenish(self) -> None:
        # After the job, not during it: on a small machine the spare's start would slow the parse down.
        if not self._closed and self._spare is None:
            self._spare = asyncio.create_task(self._spawn())

    async def run(self, path: Path, kind: str, on_passage: PassageSink) -> dict[str, Any]:
        """Extract `path`; each passage goes to `on_passage`. Returns the coverage, or raises ExtractionFailed."""
        proc = await self._take()
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stderr = asyncio.create_task(_tail(proc.stderr))
        final: list[Any] | None = None
        passages = 0
        ocr_started = False
        try:
            async with asyncio.timeout(self.wall_seconds) as deadline:
                proc.stdin.write(json.dumps({"path": str(path), "kind": kind}).encode() + b"\n")
                await proc.stdin.drain()
                proc.stdin.close()
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
            proc = await spare
            if proc.returncode is None:
                proc.kill()
            await _bounded(proc.wait(), "reaping the spare parser")


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


# -- the child ---------------------------------------------------------------------------------------


# A parser needs a handful of descriptors (stdio, the file, imports), writes no file and starts nothing.
_MAX_OPEN_FILES = 64
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000


def _confine(resource: Any) -> None:
    """No new processes, no files written, few descriptors, and no network.

    The network goes with a new, empty network namespace (not even a loopback that is up). That needs
    CAP_SYS_ADMIN (root) or unprivileged user namespaces; where neither is allowed (not Linux, or a
    locked-down kernel), the parser keeps the host's network and says so on stderr, and the other
    limits still hold.
    """
    resource.setrlimit(resource.RLIMIT_NOFILE, (_MAX_OPEN_FILES, _MAX_OPEN_FILES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    # RLIMIT_NPROC counts threads, and binds every user but root: numerical libraries (numpy under
    # openpyxl) that start a thread pool at import then abort it. One thread each starts none.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"
    if not _leave_network():
        print("sandbox: no network namespace is permitted here; the parser keeps the network", file=sys.stderr)


def _leave_network() -> bool:
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    if getattr(libc, "unshare", None) is None:
        return False
    # Root may unshare the network alone; anyone else needs a user namespace around it.
    return any(libc.unshare(flags) == 0 for flags in (_CLONE_NEWNET, _CLONE_NEWUSER | _CLONE_NEWNET))


def _child(config: dict[str, Any]) -> int:
    import ctypes
    import resource

    # Die with the service: an orphaned parser has nobody to report to.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    # Soft limits for every parser; the hard ones leave room that only the OCR path claims (services.assets.ocr).
    cpu = int(config["cpu"])
    limits = Limits(**config["limits"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + int(limits.ocr_seconds) + 2))
    memory = int(config["memory"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, max(memory, int(config.get("ocr_memory", memory)))))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _confine(resource)
    # Warm up: import every parser before the job arrives (trusted code, under the limits already).
    import docx  # noqa: F401
    import openpyxl  # noqa: F401
    import pymupdf  # noqa: F401

    from services.assets import ocr, office, pdf, webpage, wordprocessing  # noqa: F401
    from services.assets.extraction import ExtractionError, extract

    job_line = sys.stdin.readline()
    if not job_line:
        return 0
    job = json.loads(job_line)
    # Passages leave in writes of about eight pages rather than one or two: the service is woken (and the
    # parse interrupted) less often, and still stores passages while the parse goes on.
    out = open(sys.stdout.fileno(), "wb", buffering=_OUT_BUFFER, closefd=False)

    def write(record: list[Any]) -> None:
        out.write(orjson.dumps(record) + b"\n")

    def ocr_started() -> None:
        write(["ocr"])
        out.flush()

    ocr.on_start(ocr_started)
    try:
        summary = extract(Path(job["path"]), job["kind"], limits, lambda loc, text, meta: write(["p", loc, text, meta]))
    except ExtractionError as exc:
        write(["error", str(exc)])
    else:
        write(["done", summary])
    out.flush()
    return 0


if __name__ == "__main__":
    code = _child(json.loads(sys.argv[1]))
    # Skip the interpreter's teardown of the parser modules (about 0.1 s): there is nothing left to save.
    os._exit(code)
