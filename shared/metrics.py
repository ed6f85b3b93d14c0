"""Prometheus metrics of one process (prometheus-client's default registry), or of the gateway's workers
together (its multiprocess mode, when `PROMETHEUS_MULTIPROC_DIR` is set).

Health pings, the one kind of message a FastStream subscriber serves, are also counted by its Prometheus
middleware (`faststream_*`); request subjects (shared/serving.py) and events (the durable consumers of
shared/outbox.py) are served without FastStream and counted here only. The counters here add what it
cannot see: the reply's error code, the events consumed, the HTTP routes, the outbox, dead letters, runs,
extraction, lease takeovers and how many lookups shared a statement.
"""

from __future__ import annotations

import hmac
import itertools
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

# Where the gateway's workers write their figures (prometheus-client's multiprocess mode).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
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
OUTBOX_PENDING = Gauge(
    "dossier_outbox_pending_events", "Committed events not yet published to the stream", multiprocess_mode="livemax"
)
OUTBOX_LAG = Gauge(
    "dossier_outbox_lag_seconds", "Age of the oldest committed event not yet published", multiprocess_mode="livemax"
)
EVENTS_CONSUMED = Counter("dossier_events_consumed_total", "Events handled by a consumer", ["consumer", "outcome"])
DEAD_LETTERS = Counter(
    "dossier_dead_letters_total",
    "Events given up on after their retries, sent to the dead-letter subject",
    ["consumer"],
)
OUTBOX_PARKED = Counter(
    "dossier_outbox_parked_total", "Outbox rows parked (with their error) after failing to publish", ["type"]
)
RUNS = Gauge("dossier_runs", "Runs by status (runhost)", ["status"], multiprocess_mode="livemax")
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
GATEWAY_CONNECTIONS = Gauge(
    "dossier_gateway_connections", "HTTP connections the gateway holds open", multiprocess_mode="livesum"
)
GATEWAY_WORKERS = Gauge(
    "dossier_gateway_workers", "Gateway processes serving this HTTP port", multiprocess_mode="livesum"
)
EXTRACTION_FAILURES = Counter("dossier_extraction_failures_total", "Asset versions whose extraction failed", ["kind"])
EXTRACTION_WAITING = Gauge(
    "dossier_extraction_waiting",
    "Files waiting for a parser slot in this assets process",
    multiprocess_mode="livesum",
)
EXTRACTION_HELPERS = Counter(
    "dossier_extraction_helper_parsers_total", "Parsers that read blocks of a split PDF beside the file's own parser"
)
CONSUMER_PENDING = Gauge(
    "dossier_consumer_pending_events",
    "Events on the stream not yet delivered to a durable consumer",
    ["consumer"],
    multiprocess_mode="livemax",
)
DEAD_LETTER_EVENTS = Gauge(
    "dossier_dead_letter_events", "Events kept on the dead-letter stream (DOSSIER_DLQ)", multiprocess_mode="livemax"
)

# Families that mean something in one service only; every other dossier_* family (bus, outbox, events) is
# every process's. A process exports its own and the common ones, not zeros of another service's.
OWN_FAMILIES: dict[str, tuple[Counter | Gauge | Histogram, ...]] = {
    "gateway": (HTTP_REQUESTS, HTTP_SECONDS, GATEWAY_REFUSED, GATEWAY_CONNECTIONS, GATEWAY_WORKERS),
    "runhost": (RUNS, LEASE_TAKEOVERS, MODEL_REPLIES_ANSWERED_BACK),
    "assets": (EXTRACTION_SECONDS, EXTRACTION_FAILURES, EXTRACTION_WAITING, EXTRACTION_HELPERS),
    "publication": (COALESCED,),
}


def from_zero(family: Counter | Histogram, *label_values: Iterable[str]) -> None:
    """A child for every combination of `label_values`, exported at 0 before its first event: a rule's
    `increase()` needs a sample before the event to see it, and a dashboard a series to draw."""
    for values in itertools.product(*label_values):
        family.labels(*values)


def _names(families: Iterable[Counter | Gauge | Histogram]) -> set[str]:
    return {described.name for family in families for described in family.describe()}


class _ProcessView(Collector):
    """The default registry less the dossier_* families of other services; in multiprocess mode (the
    gateway's workers, services/gateway/transport/workers.py) the figures every worker wrote to the shared folder,
    summed, less the same families."""

    def __init__(self, service: str):
        others = [family for name, own in OWN_FAMILIES.items() if name != service for family in own]
        self.hidden = _names(others) - _names(OWN_FAMILIES.get(service, ()))
        folder = os.environ.get(MULTIPROC_ENV)
        self.source: Collector = MultiProcessCollector(None, folder) if folder else REGISTRY

    def collect(self) -> Iterator[Metric]:
        return (family for family in self.source.collect() if family.name not in self.hidden)


def fresh_metrics_dir(path: Path) -> None:
    """An empty folder for the gateway workers' metric files: figures of an earlier start would count again."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(mode=0o700, parents=True)


def worker_exited(pid: int, path: Path) -> None:
    """Drops a dead worker's gauges (its counters stay in the sums: a counter never goes back)."""
    mark_process_dead(pid, str(path))


def process_registry(service: str) -> CollectorRegistry:
    """What `service`'s /metrics exposes: FastStream's families, the common dossier_* ones and its own."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ProcessView(service))
    return registry


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def metrics_app(token: str, service: str) -> Callable[..., Iterable[bytes]]:
    """Prometheus' exposition behind `Authorization: Bearer <token>`: the figures of a service (its queues,
    its runs, its scopes' traffic) are for the operator's scraper, not for any local user who finds the port."""
    exposition = make_wsgi_app(process_registry(service))
    expected = f"Bearer {token}".encode()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace")
        if not hmac.compare_digest(given, expected):
            body = json.dumps(
                {"error": {"code": "unauthenticated", "message": "the metrics token is required", "details": {}}}
            ).encode()
            challenge = 'Bearer error="invalid_token", error_description="the metrics token is required"'
            start_response(
                "401 Unauthorized",
                [
                    ("Content-Type", "application/json"),
                    ("WWW-Authenticate", challenge),
                    ("Content-Length", str(len(body))),
                ],
            )
            return [body]
        return exposition(environ, start_response)  # type: ignore[no-any-return]

    return app


def serve_metrics(port: int, token: str, service: str, host: str = "127.0.0.1") -> int:
    """Serve `service`'s /metrics (bearer `token`) on a thread of this process; returns the port bound."""
    server = make_server(host, port, metrics_app(token, service), server_class=_Server, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return int(server.server_port)
