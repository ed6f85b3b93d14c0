"""shared.observe: the JSON log line, and its timestamp built once a second."""

from __future__ import annotations

import json
import logging
import random
from datetime import UTC, datetime

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared import observe
from shared.observe import HandledLog, JsonFormatter, bound, trace_logs


def iso(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")


def test_the_timestamp_is_exactly_what_datetime_writes() -> None:
    formatter = JsonFormatter("test")
    rnd = random.Random(14)
    base = 1_796_059_182
    edges = [base + 0.0, base + 0.0005, base + 0.9994999, base + 0.9995, base + 0.9999995, base + 0.9999996]
    moments = sorted(edges + [base + rnd.random() * 5 for _ in range(20_000)])
    for created in moments:
        assert formatter.timestamp(created) == iso(created), created
    # Out of order too: the cached second is replaced, never reused for another second.
    for created in rnd.sample(moments, 2_000):
        assert formatter.timestamp(created) == iso(created), created


def test_a_line_carries_its_fields_and_the_bound_ids() -> None:
    formatter = JsonFormatter("gateway")
    record = logging.LogRecord("dossier.x", logging.INFO, __file__, 1, "read %s", ("pub_1",), None)
    with bound(request_id="req_1", scope="acme"):
        line = json.loads(formatter.format(record))
    assert line == {
        "ts": iso(record.created),
        "service": "gateway",
        "level": "info",
        "msg": "read pub_1",
        "logger": "dossier.x",
        "request_id": "req_1",
        "scope": "acme",
    }


def test_a_lone_surrogate_is_escaped_not_lost() -> None:
    record = logging.LogRecord("dossier.x", logging.INFO, __file__, 1, "bad \udc80 text", (), None)
    assert json.loads(JsonFormatter("gateway").format(record))["msg"] == "bad \udc80 text"


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_handled_lines_are_summarised_above_the_rate_but_refusals_never_are() -> None:
    logger = logging.getLogger("test.handled")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    lines = Lines()
    logger.addHandler(lines)
    now = [100.2]
    handled = HandledLog(logger, per_second=3, clock=lambda: now[0])
    for _ in range(5):
        handled.write("a.get", {"outcome": "ok", "request_id": None}, "a.get ok", routine=True)
    handled.write("a.get", {"outcome": "not_found"}, "a.get not_found", routine=False)
    handled.write("b.get", {"outcome": "ok"}, "b.get ok", routine=True)
    assert [r.getMessage() for r in lines.records] == ["a.get ok"] * 3 + ["a.get not_found", "b.get ok"]
    # None values are left out of the line's fields.
    assert lines.records[0].fields == {"outcome": "ok"}  # type: ignore[attr-defined]

    now[0] = 101.0
    handled.write("a.get", {"outcome": "ok"}, "a.get ok", routine=True)
    summary, line = lines.records[-2:]
    assert summary.getMessage() == "a.get: 2 more handled, not logged one by one"
    assert summary.fields == {"key": "a.get", "summarised": 2}  # type: ignore[attr-defined]
    assert line.getMessage() == "a.get ok"
    logger.removeHandler(lines)


def test_a_line_shows_its_extra_fields() -> None:
    record = logging.LogRecord("dossier.handled", logging.INFO, __file__, 1, "s ok", (), None)
    record.fields = {"subject": "s", "outcome": "ok", "duration_ms": 1.5}
    line = json.loads(JsonFormatter("workspace").format(record))
    assert line["subject"] == "s" and line["outcome"] == "ok" and line["duration_ms"] == 1.5


def test_a_line_names_its_process_when_the_stack_named_it() -> None:
    record = logging.LogRecord("dossier.x", logging.INFO, __file__, 1, "hi", (), None)
    line = json.loads(JsonFormatter("gateway", 2, "gateway-w2").format(record))
    assert (line["process"], line["worker"]) == ("gateway-w2", 2)
    assert "process" not in json.loads(JsonFormatter("gateway").format(record))


def test_with_tracing_on_a_line_carries_its_trace_and_a_bound_request_id_tags_the_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    formatter = JsonFormatter("workspace")
    record = logging.LogRecord("dossier.x", logging.INFO, __file__, 1, "hi", (), None)
    trace_logs()
    try:
        # Outside any span, or in one that is not recorded, a line names no trace.
        assert "trace_id" not in json.loads(formatter.format(record))
        with provider.get_tracer("t").start_as_current_span("dossier.workspace.get process") as span:
            with bound(request_id="req_7"):
                line = json.loads(formatter.format(record))
        context = span.get_span_context()
        assert line["trace_id"] == f"{context.trace_id:032x}" and line["span_id"] == f"{context.span_id:016x}"
        assert exporter.get_finished_spans()[0].attributes == {"dossier.request_id": "req_7"}
    finally:
        observe._traced["on"] = False
