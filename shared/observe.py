"""Logs as JSON lines that carry the request id, the run and the scope they belong to.

The request id is set once at the edge (the gateway's `X-Request-ID`, or a new id), travels in the bus
envelope, and is put back into the context of every service that handles the request, so one id follows
a request through every log file.
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

import orjson

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
run_id_var: ContextVar[str | None] = ContextVar("run_id", default=None)
scope_var: ContextVar[str | None] = ContextVar("scope", default=None)

REQUEST_ID_MAX = 128


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
    def __init__(self, service: str, worker: int | None = None):
        super().__init__()
        self.service = service
        # Which of the gateway's workers wrote the line (they may share one output, a container's log).
        self.worker = worker
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
        if self.worker is not None:
            line["worker"] = self.worker
        for key, var in (("request_id", request_id_var), ("run_id", run_id_var), ("scope", scope_var)):
            value = getattr(record, key, None) or var.get()
            if value:
                line[key] = value
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


def configure_logging(service: str, level: str, *, worker: int | None = None) -> None:
    # Fields the JSON line never shows; each costs a lookup in every record (a line per HTTP request).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # Nor where the call was made: without this, every record walks the stack to find its caller.
    logging._srcfile = None
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service, worker))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
