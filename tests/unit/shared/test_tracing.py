"""Which spans a trace starts from, and that tracing off does no propagation work."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from shared import tracing

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C


def decide(kind: SpanKind, parent: SpanContext | None = None) -> Decision:
    context = trace.set_span_in_context(NonRecordingSpan(parent)) if parent is not None else None
    return tracing.work_roots_sampler().should_sample(context, TRACE_ID, "name", kind).decision


def parent(*, sampled: bool, remote: bool) -> SpanContext:
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    return SpanContext(TRACE_ID, 0x00F067AA0BA902B7, is_remote=remote, trace_flags=flags)


def test_a_statement_bus_call_or_publish_with_no_parent_starts_no_trace() -> None:
    # What an idle loop does: a database statement, a health ping, a publish, outside any work.
    assert decide(SpanKind.CLIENT) == Decision.DROP
    assert decide(SpanKind.PRODUCER) == Decision.DROP


def test_work_starts_a_trace() -> None:
    # An HTTP request, a handled request or event with no caller's context, a unit of a loop's work.
    for kind in (SpanKind.SERVER, SpanKind.CONSUMER, SpanKind.INTERNAL):
        assert decide(kind) == Decision.RECORD_AND_SAMPLE, kind


def test_a_child_follows_its_parent() -> None:
    for remote in (False, True):
        assert decide(SpanKind.CLIENT, parent(sampled=True, remote=remote)) == Decision.RECORD_AND_SAMPLE
        # A ping whose root was dropped carries "not sampled": its handling is dropped too.
        assert decide(SpanKind.CONSUMER, parent(sampled=False, remote=remote)) == Decision.DROP


def test_tracing_off_propagates_nothing() -> None:
    assert not tracing.enabled()
    assert tracing.current_headers() is None
    with tracing.work_span("run attempt", {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}):
        assert tracing.current_headers() is None
    with tracing.continued({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}):
        assert not trace.get_current_span().get_span_context().is_valid


def test_every_span_started_while_a_request_id_is_bound_carries_it() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from shared.observe import bound

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(tracing.request_id_spans())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with bound(request_id="req_9"), tracer.start_as_current_span("run attempt"):
        with tracer.start_as_current_span("SELECT", kind=SpanKind.CLIENT):
            pass
    with tracer.start_as_current_span("asset version recovery"):
        pass
    assert {s.name: (s.attributes or {}).get("dossier.request_id") for s in exporter.get_finished_spans()} == {
        "SELECT": "req_9",
        "run attempt": "req_9",
        "asset version recovery": None,
    }
