"""The parser process (`python -m services.assets.parser`), started and fed by services.assets.sandbox.

It sets its limits, enters the confinement (services.assets.confinement), imports PyMuPDF and the formats'
modules, says `["ready"]` on stdout, and only then receives its one job from the stdin socket: `{"kind"}`
and the input's open descriptor. It answers in JSON lines on stdout: `["p", locator, text, meta]` per passage,
`["ocr"]` when OCR starts, and finally `["done", coverage]` or `["error", message]`; or, where it cannot
be confined, `["refused", reason]` instead of `["ready"]`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from services.assets import confinement
from services.assets.extract.base import Limits

_OUT_BUFFER = 32 * 1024

# A parser needs a handful of descriptors (stdio, the file, imports), writes no file and starts no process.
_MAX_OPEN_FILES = 64
# Threads the OCR path may start. The kernel counts RLIMIT_NPROC per user, and each parser has a user of its
# own (services.assets.confinement): its three processes there, and OpenVINO's two threads a model
# (services.assets.extract.ocr). A parser taken over by its file can hold no more than this, and no other
# parser's threads count against it. Processes stay refused by the seccomp filter (services.assets.syscalls).
_OCR_THREADS = 16
# One record of the child's output.
Emit = Callable[[list[Any]], None]
# What the confined child does with its job: `work(kind, input, limits, emit)` returns the final record.
Work = Callable[[str, Path, Limits, Emit], list[Any]]


def serve(config: dict[str, Any], work: Work) -> int:
    """The parser process: limits, confinement, then one job. Its output is JSON lines on stdout."""
    import ctypes
    import resource

    out = open(sys.stdout.fileno(), "wb", buffering=_OUT_BUFFER, closefd=False)

    def write(record: list[Any]) -> None:
        out.write(orjson.dumps(record) + b"\n")

    # Die with the service: an orphaned parser has nobody to report to.
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    # Soft limits for every parser; the hard ones leave room that only the OCR path claims (services.assets.extract.ocr).
    cpu = int(config["cpu"])
    limits = Limits(**config["limits"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + int(limits.ocr_seconds) + 2))
    memory = int(config["memory"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, max(memory, int(config.get("ocr_memory", memory)))))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        confinement.enter(confinement.Plan.from_json(config["confinement"]))
    except OSError as exc:
        # Said without paths: the reason reaches the version's error and the health route.
        write(["refused", exc.strerror or type(exc).__name__])
        out.flush()
        return 0
    resource.setrlimit(resource.RLIMIT_NOFILE, (_MAX_OPEN_FILES, _MAX_OPEN_FILES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    # No thread but on the OCR path, which lifts the soft limit to the hard one. RLIMIT_NPROC counts threads,
    # and binds every user but root: numerical libraries (numpy under openpyxl) that start a thread pool at
    # import then abort it. One thread each starts none.
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    resource.setrlimit(
        resource.RLIMIT_NPROC, (0, _OCR_THREADS if hard == resource.RLIM_INFINITY else min(hard, _OCR_THREADS))
    )
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"
    # Warm up before the job arrives (trusted code, already confined): PyMuPDF and every format's module. A
    # spare is started for every file, so its start is part of what each file costs: python-docx and
    # openpyxl (with numpy), two thirds of the imports' processor time (0.35 of 0.5 s), are imported by the
    # jobs of their kinds instead.
    import pymupdf  # noqa: F401

    from services.assets.extract import ocr, office, pdf, webpage, wordprocessing  # noqa: F401

    write(["ready"])
    out.flush()
    jobs = socket.socket(fileno=0)
    message, fds, _, _ = socket.recv_fds(jobs, 65536, 1)
    if not message or len(fds) != 1:
        return 0
    job = json.loads(message)

    def ocr_started() -> None:
        write(["ocr"])
        out.flush()

    ocr.on_start(ocr_started)
    path = Path(f"/proc/self/fd/{fds[0]}")
    if job.get("split"):
        final = _part(path, limits, write, out.flush, jobs, int(job["split"]))
    else:
        final = work(str(job["kind"]), path, limits, write)
    if final is not None:
        write(final)
    out.flush()
    return 0


def _extract(kind: str, path: Path, limits: Limits, emit: Emit) -> list[Any]:
    from services.assets.extract.base import ExtractionError
    from services.assets.extract.dispatch import extract

    try:
        # Passages leave in writes of about eight pages rather than one or two (the output is buffered):
        # the service is woken (and the parse interrupted) less often, and still stores passages meanwhile.
        summary = extract(path, kind, limits, lambda loc, text, meta: emit(["p", loc, text, meta]))
    except ExtractionError as exc:
        return ["error", str(exc)]
    return ["done", summary]


def _part(
    path: Path, limits: Limits, emit: Emit, flush: Callable[[], None], jobs: socket.socket, least: int
) -> list[Any] | None:
    """A share of a split PDF (services.assets.splitting): `["pages", n, scanned]`, then one message per line
    on the job socket: `{"block": [first, last], "ocr": [pages, seconds]}` is answered by its passages and
    `["block", tally]`; `{"rest": seed, "cpu": seconds}` reads the rest of the file as one parser would from
    there, within what is left of the file's CPU time; the socket's end dismisses the part. A file that is
    not one to split (encrypted, empty, or shorter than `least` pages and not a scan) is read whole at once,
    as without a split."""
    from services.assets.extract import ocr, pdf
    from services.assets.extract.base import Collector, Coverage, ExtractionError, failure
    from services.assets.extract.dispatch import extract

    try:
        part = pdf.Part(path, Collector(limits, Coverage(), lambda *_: None))
    except ExtractionError as exc:
        return ["error", str(exc)]
    pages = part.pages()
    scanned = pages is not None and pages > 1 and part.scanned()
    if pages is None or (pages < least and not scanned):
        part.close()
        return _extract("pdf", path, limits, emit)
    emit(["pages", pages, scanned])
    flush()

    def passage(locator: str, text: str, meta: dict[str, Any]) -> None:
        emit(["p", locator, text, meta])

    for line in jobs.makefile("rb"):
        message = json.loads(line)
        if "block" in message:
            first, last = (int(n) for n in message["block"])
            share = message["ocr"]
            try:
                tally = part.block(first, last, passage, ocr=(int(share[0]), float(share[1])))
            except Exception as exc:
                return ["error", str(exc if isinstance(exc, ExtractionError) else failure("pdf", exc))]
            emit(["block", {**tally, "cpu": time.process_time()}])
            flush()
            continue
        part.close()
        import resource

        # The file's CPU time is shared by its parsers: this one may use what the others left (OCR aside, whose
        # seconds the seed carries). Once this process has run OCR its soft limit stays lifted to the hard one.
        left = int(message["cpu"])
        hard = left + int(limits.ocr_seconds) + 2
        resource.setrlimit(resource.RLIMIT_CPU, (hard if ocr.started() else left, hard))
        try:
            summary = extract(path, "pdf", limits, passage, seed=pdf.Seed(**message["rest"]))
        except ExtractionError as exc:
            return ["error", str(exc)]
        return ["done", summary]
    return None


if __name__ == "__main__":
    code = serve(json.loads(sys.argv[1]), _extract)
    # Skip the interpreter's teardown of the parser modules (about 0.1 s): there is nothing left to save.
    os._exit(code)
