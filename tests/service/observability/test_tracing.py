"""One trace spans the gateway, the bus, the service and its database (OpenTelemetry, in-memory exporter)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

from tests.support.infra import Infra
from tests.support.service import ROOT


def test_one_trace_spans_gateway_bus_service_and_database(infra: Infra) -> None:
    gateway_env = infra.settings_env("gateway", DOSSIER_ADMIN_TOKEN=f"adm_{secrets.token_urlsafe(16)}")
    publication_env = infra.settings_env("publication")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOSSIER_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.trace_probe", json.dumps(publication_env), json.dumps(gateway_env)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    spans = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    server = [s for s in spans if s["kind"] == "SERVER" and s["parent_id"] is None]
    assert len(server) == 1, spans
    trace_id = server[0]["trace_id"]
    in_trace = [s for s in spans if s["trace_id"] == trace_id]
    kinds = {s["kind"] for s in in_trace}
    assert {"SERVER", "CLIENT", "CONSUMER"} <= kinds, in_trace
    client = next(s for s in in_trace if s["name"] == "dossier.publication.commit request")
    consumer = next(s for s in in_trace if s["kind"] == "CONSUMER")
    assert "dossier.publication.commit" in consumer["name"] + str(consumer["attributes"]), consumer
    # The consumer continues the client's span across the bus, and the service's SQL is inside the trace.
    by_id = {s["span_id"]: s for s in in_trace}
    ancestor = by_id.get(consumer["parent_id"])
    assert ancestor is not None and ancestor["span_id"] == client["span_id"]
    database = [s for s in in_trace if s["attributes"].get("db.system") == "postgresql"]
    assert database, in_trace
