"""Traces as a collector gets them from a whole stack (OTLP/HTTP into a receiver of the test's own):
an idle stack sends nothing, span names are templates, and one run is one trace across every service it
touches and the consumers of its events."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.api import Api, probe
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.otlp import OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.support.stack import RunningStack, start_stack, stop_stack

# Every name a span may have: a subject with what was done with it, an HTTP method with its route template,
# a SQL verb, or the name of a background loop's unit of work. None holds an id.
NAME_SHAPES = (
    re.compile(r"dossier(\.[a-z_]+)+ (request|process|publish)"),
    re.compile(r"(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS)( (/(v1|[a-z_.-]+|\{[a-z_]+(:path)?\}))+/?)?"),
    re.compile(r"[A-Z]+;?"),
    re.compile(r"run attempt|run association retry|asset version recovery"),
)
RUN_SERVICES = {"gateway", "runhost", "workspace", "publication", "artifact", "assets"}


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def traced_stack(dossier_homes: Callable[[str], Path], receiver: OtlpReceiver) -> Iterator[RunningStack]:
    # A short batch delay: spans reach the receiver within a fraction of a second of their end.
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    running = start_stack(dossier_homes("traces"), extra_env=env)
    try:
        yield running
    finally:
        stop_stack(running.proc)


def settled(receiver: OtlpReceiver) -> None:
    """Wait until nothing has arrived for a second (what start-up or an earlier test sent is in)."""
    seen = {"count": -1, "since": time.monotonic()}

    def quiet() -> bool:
        count = len(receiver.spans())
        if count != seen["count"]:
            seen["count"], seen["since"] = count, time.monotonic()
        return time.monotonic() - seen["since"] >= 1.0

    probe(quiet, timeout=60, interval=0.2)


def test_an_idle_stack_exports_no_span(traced_stack: RunningStack, receiver: OtlpReceiver) -> None:
    settled(receiver)
    receiver.clear()
    # Ten seconds of the loops an idle stack runs: the outbox relays, the run host's claim poll, sweepers
    # and gauges, the consumers' fetches, every process's health report.
    time.sleep(10)
    spans = receiver.spans()
    assert spans == [], sorted({(s.service, s.name) for s in spans})


def in_trace(receiver: OtlpReceiver, trace_id: str) -> list[ReceivedSpan]:
    return [s for s in receiver.spans() if s.trace_id == trace_id]


def test_a_run_is_one_trace_through_every_service_and_its_events_consumers(
    traced_stack: RunningStack, receiver: OtlpReceiver
) -> None:
    api = Api(traced_stack)
    ws = api.workspace()
    api.upload(pdf(ANNOUNCEMENT), f"announcement-{uuid.uuid4().hex[:6]}", "announcement.pdf", ws["id"])
    api.wait_catalog(ws["id"], 1)

    run = api.start_run(ws["id"], "Are redemptions of Fund X gated or suspended?")
    admissions = probe(
        lambda: [
            s
            for s in receiver.spans()
            if s.name == "POST /v1/workspaces/{workspace_id}/runs"
            and 202 in (s.attributes.get("http.status_code"), s.attributes.get("http.response.status_code"))
        ],
        timeout=10,
    )
    assert len(admissions) == 1, admissions
    trace_id = admissions[0].trace_id
    assert api.wait_run(run["id"])["status"] == "completed"

    def complete() -> list[ReceivedSpan] | None:
        spans = in_trace(receiver, trace_id)
        names = {(s.service, s.name) for s in spans}
        done = {
            ("dossier-runhost", "dossier.evt.run.completed publish"),
            ("dossier-workspace", "dossier.evt.publication.committed process"),
        }
        ids = {s.span_id for s in spans}
        # Every parent is in (a span is sent when it ends, so a parent comes after its children).
        return spans if done <= names and all(s.parent_id in ids for s in spans if s.parent_id) else None

    spans = probe(complete, timeout=30)
    by_id = {s.span_id: s for s in spans}
    # One root, the admission, and the probe above saw every other span's parent in the trace.
    assert [s for s in spans if s.parent_id is None] == admissions
    assert {s.service.removeprefix("dossier-") for s in spans} >= RUN_SERVICES

    # The worker's attempt continues the admission, however late it started.
    attempt = next(s for s in spans if s.name == "run attempt")
    assert attempt.service == "dossier-runhost" and attempt.attributes["dossier.run_id"] == run["id"]
    ancestors = []
    parent = attempt.parent_id
    while parent is not None:
        ancestors.append(by_id[parent].name)
        parent = by_id[parent].parent_id
    assert "dossier.runhost.admit process" in ancestors and ancestors[-1] == admissions[0].name

    # An event's consumer is a child of the relay's publish, which is a child of the code that enqueued it.
    consumed = next(s for s in spans if s.name == "dossier.evt.publication.committed process")
    published = by_id[consumed.parent_id or ""]
    assert (published.service, published.kind, published.name) == (
        "dossier-publication",
        "PRODUCER",
        "dossier.evt.publication.committed publish",
    )
    assert consumed.kind == "CONSUMER" and consumed.attributes["messaging.consumer.group.name"]
    assert by_id[published.parent_id or ""].service == "dossier-publication"
    # Each of the run's events is published inside its trace.
    for event in ("run.admitted", "run.started", "run.completed"):
        assert f"dossier.evt.{event} publish" in {s.name for s in spans}, event


def test_span_names_are_templates(traced_stack: RunningStack, receiver: OtlpReceiver) -> None:
    api = Api(traced_stack)
    ws = api.workspace()
    api.ok("GET", f"/v1/workspaces/{ws['id']}")
    api.ok("GET", "/v1/workspaces/ws_does_not_exist", expect=(404,))
    pub = api.publish("Note", "A finding.", ws["id"])
    api.read(pub)
    api.wait_catalog(ws["id"], 1)
    settled(receiver)
    names = {s.name for s in receiver.spans()}
    assert "GET /v1/workspaces/{workspace_id}" in names
    assert "GET /v1/publications/{pub_id}/versions/{version}" in names
    unbounded = sorted(n for n in names if not any(shape.fullmatch(n) for shape in NAME_SHAPES))
    assert unbounded == [], unbounded
    assert not [n for n in names if "_INBOX" in n or re.search(r"[0-9a-f]{8}", n)]
