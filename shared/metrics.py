"""Prometheus metrics of one process (prometheus-client's default registry).

Health pings and event consumers are also counted by FastStream's own Prometheus middleware
(`faststream_*`); request subjects are served without FastStream (shared/serving.py) and counted here
only. The counters here add what it cannot see: the reply's error code, the HTTP routes, the outbox,
dead letters, runs, extraction, lease takeovers and how many lookups shared a statement.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

BUS_REQUESTS = Counter(
    "dossier_bus_requests_total", "Bus requests handled, by subject and reply code", ["subject", "code"]
)
BUS_SECONDS = Histogram(
    "dossier_bus_request_seconds", "Time to handle one bus request", ["subject"], buckets=LATENCY_BUCKETS
)
BUS_CALLS = Counter("dossier_bus_calls_total", "Bus requests sent, by subject and outcome", ["subject", "outcome"])
HTTP_REQUESTS = Counter(
    "dossier_http_requests_total", "HTTP requests answered, by route and status", ["method", "route", "status"]
)
HTTP_SECONDS = Histogram(
    "dossier_http_request_seconds", "Time to answer one HTTP request", ["method", "route"], buckets=LATENCY_BUCKETS
)
OUTBOX_PENDING = Gauge("dossier_outbox_pending_events", "Committed events not yet published to the stream")
OUTBOX_LAG = Gauge("dossier_outbox_lag_seconds", "Age of the oldest committed event not yet published")
EVENTS_CONSUMED = Counter("dossier_events_consumed_total", "Events handled by a consumer", ["consumer", "outcome"])
DEAD_LETTERS = Counter(
    "dossier_dead_letters_total",
    "Events given up on after their retries, sent to the dead-letter subject",
    ["consumer"],
)
OUTBOX_PARKED = Counter(
    "dossier_outbox_parked_total", "Outbox rows parked (with their error) after failing to publish", ["type"]
)
RUNS = Gauge("dossier_runs", "Runs by status (runhost)", ["status"])
LEASE_TAKEOVERS = Counter("dossier_lease_takeovers_total", "Runs taken over from a worker whose lease expired")
MODEL_REPLIES_ANSWERED_BACK = Counter(
    "dossier_model_replies_answered_back_total",
    "Model replies that were no usable tool call (narration, length, content_filter, empty), answered back",
    ["kind"],
)
EXTRACTION_SECONDS = Histogram(
    "dossier_extraction_seconds",
    "Time to extract one asset version",
    ["kind", "status"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
COALESCED = Histogram(
    "dossier_coalesced_lookups",
    "Lookups answered by one statement (shared.coalesce), by what was looked up",
    ["lookup"],
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
GATEWAY_REFUSED = Counter(
    "dossier_gateway_refused_total",
    "Connections and requests the gateway turned away before a route ran, by reason",
    ["reason"],
)
GATEWAY_CONNECTIONS = Gauge("dossier_gateway_connections", "HTTP connections the gateway holds open")
EXTRACTION_FAILURES = Counter("dossier_extraction_failures_total", "Asset versions whose extraction failed", ["kind"])


def serve_metrics(port: int, host: str = "127.0.0.1") -> int:
    """Serve /metrics on a thread of this process; returns the port actually bound."""
    server, _thread = start_http_server(port, addr=host, registry=REGISTRY)
    return int(server.server_port)
