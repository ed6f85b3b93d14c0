"""OpenTelemetry traces: gateway → bus → service → database, exported over OTLP.

Off unless `OTEL_EXPORTER_OTLP_ENDPOINT` is set (or a test hands in an exporter). When off, nothing is
instrumented and the bus client skips context propagation, so tracing costs nothing.
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Tracer

_state: dict[str, Any] = {"enabled": False}


def tracing_requested() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def enabled() -> bool:
    return bool(_state["enabled"])


def setup_tracing(service: str, exporter: Any = None) -> bool:
    """Install a tracer provider for this process. With no exporter given, OTLP over HTTP from the env."""
    if exporter is None and not tracing_requested():
        return False
    if _state["enabled"]:
        return True
    from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": f"dossier-{service}"}))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    AsyncPGInstrumentor().instrument()
    _state["enabled"] = True
    return True


def tracer() -> Tracer:
    return trace.get_tracer("dossier")


def broker_middlewares() -> list[Any]:
    """FastStream's own telemetry middleware: a consumer span per message, continued from its headers."""
    if not enabled():
        return []
    from faststream.nats.opentelemetry import NatsTelemetryMiddleware

    return [NatsTelemetryMiddleware(tracer_provider=trace.get_tracer_provider())]


def instrument_fastapi(app: Any) -> None:
    if enabled():
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, tracer_provider=trace.get_tracer_provider())


def client_span(subject: str) -> Any:
    return tracer().start_as_current_span(
        f"{subject} request",
        kind=SpanKind.CLIENT,
        attributes={"messaging.system": "nats", "messaging.destination.name": subject},
    )


def inject_headers() -> dict[str, str]:
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


def consumer_span(subject: str, headers: dict[str, str] | None) -> Any:
    """The handling of one request, continued from the trace context the caller put in its headers."""
    return tracer().start_as_current_span(
        f"{subject} process",
        context=propagate.extract(headers or {}),
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": "nats",
            "messaging.destination.name": subject,
            "messaging.operation": "process",
        },
    )
