"""OpenTelemetry traces: one trace from an HTTP request through the bus, the services, their databases, the
events the request caused and their consumers, exported over OTLP.

Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set (or a test hands in an exporter). When off, nothing is
instrumented, and the bus, the outbox and the run host skip every propagation step, so tracing costs nothing.

When on, a trace starts only where work starts: an HTTP request (health probes and scrapes excepted), a
handled bus request or event, or a unit of work a loop found to do. A span with no parent that is only a
database statement, a bus call or a publish (what an idle loop does every second) is not recorded, and
neither is anything beneath it. Span names are templates: subjects, event subjects, route templates and
SQL verbs, never an id.

Every span started while a request id is bound (shared.observe.bound) carries it as `dossier.request_id`,
and every log line written inside a recorded span carries its `trace_id`. `sql=False` (DOSSIER_TRACE_SQL)
leaves the database statements out: they were nine tenths of a run's trace.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Tracer
from opentelemetry.util.types import Attributes

from shared.observe import REQUEST_ID_ATTRIBUTE, request_id_var, trace_logs

_state: dict[str, Any] = {"enabled": False}

# Probes and scrapes arrive every few seconds on an idle stack; they are not requests anyone traces.
UNTRACED_URLS = ("/v1/health$", "/metrics$")


def tracing_requested() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def enabled() -> bool:
    return bool(_state["enabled"])


def work_roots_sampler() -> Any:
    """Children follow their parent's decision; a root is recorded unless it is a bare client or producer
    span (a statement, a bus call or a publish made by a loop outside any work)."""
    from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult

    class WorkRoots(Sampler):
        def should_sample(
            self,
            parent_context: Context | None,
            trace_id: int,
            name: str,
            kind: SpanKind | None = None,
            attributes: Attributes = None,
            links: Sequence[Link] | None = None,
            trace_state: Any = None,
        ) -> SamplingResult:
            if kind in (SpanKind.CLIENT, SpanKind.PRODUCER):
                return SamplingResult(Decision.DROP)
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

        def get_description(self) -> str:
            return "WorkRoots"

    return ParentBased(root=WorkRoots())


def request_id_spans() -> Any:
    """A span processor that puts the bound request id on every span it sees start."""
    from opentelemetry.sdk.trace import Span, SpanProcessor

    class RequestIds(SpanProcessor):
        def on_start(self, span: Span, parent_context: Context | None = None) -> None:
            request_id = request_id_var.get()
            if request_id:
                span.set_attribute(REQUEST_ID_ATTRIBUTE, request_id)

    return RequestIds()


def setup_tracing(service: str, exporter: Any = None, *, sql: bool = True) -> bool:
    """Install a tracer provider for this process. With no exporter given, OTLP over HTTP from the env.
    `sql`: a span for each database statement (asyncpg's instrumentation)."""
    if exporter is None and not tracing_requested():
        return False
    if _state["enabled"]:
        return True
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(
        resource=Resource.create({"service.name": f"dossier-{service}"}), sampler=work_roots_sampler()
    )
    provider.add_span_processor(request_id_spans())
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    if sql:
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

        AsyncPGInstrumentor().instrument()
    _state["enabled"] = True
    trace_logs()
    return True


def tracer() -> Tracer:
    return trace.get_tracer("dossier")


def instrument_fastapi(app: Any) -> None:
    if enabled():
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        excluded = [*UNTRACED_URLS, os.environ.get("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS", "")]
        FastAPIInstrumentor.instrument_app(
            app,
            tracer_provider=trace.get_tracer_provider(),
            excluded_urls=",".join(p for p in excluded if p),
            # One span per request, not one more per ASGI message sent or received.
            exclude_spans=["receive", "send"],
        )


def _messaging(subject: str, operation: str, **more: Any) -> dict[str, Any]:
    extra = {k: v for k, v in more.items() if v is not None}
    return {
        "messaging.system": "nats",
        "messaging.destination.name": subject,
        "messaging.operation": operation,
        **extra,
    }


def client_span(subject: str) -> Any:
    return tracer().start_as_current_span(
        f"{subject} request", kind=SpanKind.CLIENT, attributes=_messaging(subject, "request")
    )


def inject_headers() -> dict[str, str]:
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


def consumer_span(subject: str, headers: Mapping[str, str] | None) -> Any:
    """The handling of one request, continued from the trace context the caller put in its headers."""
    return tracer().start_as_current_span(
        f"{subject} process",
        context=propagate.extract(headers or {}),
        kind=SpanKind.CONSUMER,
        attributes=_messaging(subject, "process"),
    )


def current_headers() -> dict[str, str] | None:
    """The current span's context as W3C headers (`traceparent`, `tracestate`), for work that goes on later
    elsewhere (an outbox row, an admitted run); None when tracing is off or nothing here is traced."""
    if not enabled() or not trace.get_current_span().get_span_context().trace_flags.sampled:
        return None
    return inject_headers() or None


@contextmanager
def publish_span(
    subject: str, headers: Mapping[str, str] | None, *, message_id: str, request_id: str | None = None
) -> Iterator[dict[str, str]]:
    """The publish of one outbox row, a child of the code that enqueued it; yields the headers to send with it,
    which carry the publish span's own context to the event's consumers. `request_id`: the event's (the relay
    publishes outside any request)."""
    attributes = _messaging(
        subject, "publish", **{"messaging.message.id": message_id, REQUEST_ID_ATTRIBUTE: request_id}
    )
    with tracer().start_as_current_span(
        f"{subject} publish", context=propagate.extract(headers or {}), kind=SpanKind.PRODUCER, attributes=attributes
    ):
        yield inject_headers()


def event_span(subject: str, headers: Mapping[str, str] | None, *, consumer: str) -> Any:
    """The handling of one event by a durable consumer, a child of the relay's publish of it."""
    return tracer().start_as_current_span(
        f"{subject} process",
        context=propagate.extract(headers or {}),
        kind=SpanKind.CONSUMER,
        attributes=_messaging(subject, "process", **{"messaging.consumer.group.name": consumer}),
    )


def record_failure(exc: BaseException) -> None:
    """Mark the current span failed with `exc`, for a failure the code handles itself (and so the span never sees)."""
    if enabled():
        span = trace.get_current_span()
        span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))


@contextmanager
def work_span(
    name: str, headers: Mapping[str, str] | None = None, attributes: Mapping[str, Any] | None = None
) -> Iterator[None]:
    """One unit of work a background loop found to do: a root, or a child of the stored `headers` (a run's
    attempt continues its admission's trace). A no-op when tracing is off."""
    if not enabled():
        yield
        return
    parent = propagate.extract(headers) if headers else None
    with tracer().start_as_current_span(name, context=parent, kind=SpanKind.INTERNAL, attributes=attributes):
        yield


@contextmanager
def continued(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Code inside runs in the stored trace context (no span of its own): what it enqueues or calls joins it."""
    if not enabled() or not headers:
        yield
        return
    token = context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        context.detach(token)


@contextmanager
def untraced() -> Iterator[None]:
    """A loop's upkeep inside traced work (a lease heartbeat, a cancel watch): no spans from it or beneath it.
    Tasks created inside inherit it."""
    if not enabled():
        yield
        return
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    with suppress_instrumentation():
        yield
