"""Logs as JSON lines that carry the request id, the run and the scope they belong to, and the trace.

The request id is set once at the edge (the gateway's `X-Request-ID`, or a new id), travels in the bus
envelope, and is put back into the context of every service that handles the request, so one id follows
a request through every log file. With tracing on, a line written inside a recorded span carries its
`trace_id` and `span_id`, and binding a request id also puts it on the span that is current then
(`dossier.request_id`; shared/tracing.py puts it on every span started while it is bound).

Under the local stack every process of a kind appends to one file (`logs/<service>.log`, O_APPEND, a line
per write) and the supervisor rotates it by renaming it away (devstack/logfiles.py): `LogFileHandler`
notices the rename and moves the process's output to the new file.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path

import orjson
from opentelemetry import trace

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
run_id_var: ContextVar[str | None] = ContextVar("run_id", default=None)
scope_var: ContextVar[str | None] = ContextVar("scope", default=None)

REQUEST_ID_MAX = 128
# The span attribute that carries the request id (the log lines' `request_id`).
REQUEST_ID_ATTRIBUTE = "dossier.request_id"
# Set by shared.tracing when this process records spans: lines then carry the trace, and bound ids tag spans.
_traced = {"on": False}


def trace_logs() -> None:
    """From now on, lines carry the current span's ids, and `bound` tags the current span (tracing is on)."""
    _traced["on"] = True


def new_request_id() -> str:
    # 128 random bits as hex, like a uuid4's without its version bits (and without building a UUID).
    return f"req_{os.urandom(16).hex()}"


def acceptable_request_id(value: str | None) -> bool:
    """A caller's own id is kept when it is short printable ASCII; anything else is replaced."""
    return bool(value) and len(value or "") <= REQUEST_ID_MAX and all(33 <= ord(ch) < 127 for ch in value or "")


@contextmanager
def bound(*, request_id: str | None = None, run_id: str | None = None, scope: str | None = None) -> Iterator[None]:
    """Put these ids into the context of the code inside (and of every log line it writes)."""
    tokens = [
        (var, var.set(value))
        for var, value in ((request_id_var, request_id), (run_id_var, run_id), (scope_var, scope))
        if value is not None
    ]
    if request_id is not None and _traced["on"]:
        # The span opened before the id was known (the gateway's request, a bus request's or an event's
        # handling); spans started inside get it from shared.tracing's span processor.
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attribute(REQUEST_ID_ATTRIBUTE, request_id)
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


# Lines per second and per subject (or consumer and event type) written in full; above it, one summary line.
HANDLED_LINES_PER_SECOND = 50


class HandledLog:
    """One `info` line per handled request or consumed event, summarised above a rate.

    Each key (a subject, or a consumer and an event type) writes up to `per_second` lines in each second;
    the rest of that second are counted, and the first line of a later second on that key is preceded by
    one summary line with the count. A refusal or a fault is always written: only `ok` outcomes are
    summarised, so what an operator looks for is never among the counted ones. Above the rate a request
    costs a dict lookup instead of a log line (about 10 µs).
    """

    def __init__(
        self,
        logger: logging.Logger,
        per_second: int = HANDLED_LINES_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._log = logger
        self._per_second = per_second
        self._clock = clock
        # key → [the second counted, lines written in it, lines not written in it]
        self._windows: dict[str, list[int]] = {}

    def write(self, key: str, fields: dict[str, object], msg: str, *args: object, routine: bool) -> None:
        """`routine`: an outcome that may be summarised (a success); the others are always written."""
        if not self._log.isEnabledFor(logging.INFO):
            return
        second = int(self._clock())
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = [second, 0, 0]
        elif window[0] != second:
            if window[2]:
                self._log.info(
                    "%s: %d more handled, not logged one by one",
                    key,
                    window[2],
                    extra={"fields": {"key": key, "summarised": window[2]}},
                )
            window[0], window[1], window[2] = second, 0, 0
        if routine and window[1] >= self._per_second:
            window[2] += 1
            return
        window[1] += 1
        self._log.info(msg, *args, extra={"fields": {k: v for k, v in fields.items() if v is not None}})


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str, worker: int | None = None, process: str | None = None):
        super().__init__()
        self.service = service
        # Which of the gateway's workers wrote the line (they may share one output, a container's log).
        self.worker = worker
        # The local stack's name of the process (`gateway-w2`, `workspace.2`): the processes of a kind share a file.
        self.process = process
        self._second = -1
        self._stamp = ""

    def timestamp(self, created: float) -> str:
        """`datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")`, with the date and time of
        day built once a second: building them for every line was a seventh of the gateway's access log."""
        second = int(created)
        micros = round((created - second) * 1_000_000)
        if micros >= 1_000_000:
            second, micros = second + 1, micros - 1_000_000
        if second != self._second:
            self._second = second
            self._stamp = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        return f"{self._stamp}.{micros // 1000:03d}+00:00"

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": self.timestamp(record.created),
            "service": self.service,
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
            "logger": record.name,
        }
        if self.process is not None:
            line["process"] = self.process
        if self.worker is not None:
            line["worker"] = self.worker
        for key, var in (("request_id", request_id_var), ("run_id", run_id_var), ("scope", scope_var)):
            value = getattr(record, key, None) or var.get()
            if value:
                line[key] = value
        if _traced["on"]:
            span = trace.get_current_span().get_span_context()
            # Only a recorded trace: a dropped one (an idle loop's statement) is nowhere to be found.
            if span.trace_flags.sampled:
                line["trace_id"] = format(span.trace_id, "032x")
                line["span_id"] = format(span.span_id, "016x")
        fields = getattr(record, "fields", None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(line, default=str).decode()
        except TypeError:
            # A lone surrogate (text a caller sent) is not UTF-8; escaped, the line is still written.
            return json.dumps(line, default=str)


# How often (in the time of the lines written) a process looks whether its log file was rotated away.
FOLLOW_SECONDS = 0.5


def follow_rotation(path: Path) -> bool:
    """Point stdout and stderr at `path` when they no longer write to the file of that name (the supervisor
    renamed it to `<name>.1`, or nothing was there yet); True when they were moved.

    Until then the lines go on into the renamed file, which the supervisor keeps as a backup, so none is lost.
    A traceback or anything else written to the descriptors follows too, not only the log's lines.
    """
    here = os.fstat(2)
    try:
        there = os.stat(path)
        if (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino):
            return False
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)
    return True


class LogFileHandler(logging.Handler):
    """Lines to stderr, which is (or becomes) the O_APPEND file `path`, followed across its rotations.

    Several processes append to the same file: each line goes out in one write(2) of its own (not through
    a buffer that could cut a long line in two), which an O_APPEND file takes whole. Whether the file was
    renamed is looked at on a line's write at most every FOLLOW_SECONDS (two system calls), not for every
    line: the gateway writes a line per request.
    """

    def __init__(self, path: Path):
        super().__init__()
        self.path = path
        self._next_check = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = (self.format(record) + "\n").encode("utf-8", "replace")
            if record.created >= self._next_check:
                self._next_check = record.created + FOLLOW_SECONDS
                try:
                    follow_rotation(self.path)
                except OSError:
                    pass  # the folder is gone or full: the line still goes where the output already goes
            written = os.write(2, data)
            while written < len(data):  # only a signal or a full disk cuts a write to a file short
                data = data[written:]
                written = os.write(2, data)
        except Exception:
            self.handleError(record)


def configure_logging(
    service: str,
    level: str,
    *,
    worker: int | None = None,
    process: str | None = None,
    log_file: Path | None = None,
) -> None:
    """JSON lines to stderr; with `log_file` (the local stack's DOSSIER_LOG_FILE), to that file, across its
    rotations. `process` names the process in every line (the processes of a kind share the file)."""
    # Fields the JSON line never shows; each costs a lookup in every record (a line per HTTP request).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # Nor where the call was made: without this, every record walks the stack to find its caller.
    logging._srcfile = None
    handler = logging.StreamHandler(sys.stderr) if log_file is None else LogFileHandler(log_file)
    handler.setFormatter(JsonFormatter(service, worker, process or None))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
