"""docs/asyncapi.json is the contracts': every subject with its own request and reply, every event type, the
headers the code sends and nothing more; regenerated here, any difference fails. tests/e2e/test_asyncapi_live.py
holds it to what a running stack serves and publishes."""

from __future__ import annotations

import importlib
import json
from collections import defaultdict
from typing import Any

import jsonschema
import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from pydantic import BaseModel

from devstack import asyncapi
from shared import tracing
from shared.batching import BATCH_HEADER
from shared.bus import described_endpoints
from shared.contracts import artifact, common, gateway, mcp, registry
from shared.contracts.common import SERVICES, EventType, Subject, health_subject
from shared.settings import ArtifactSettings, AssetsSettings, PublicationSettings, RunhostSettings, WorkspaceSettings
from tests.support.asyncapi import COMMITTED, payload, resolve

# Subjects whose reply carries no data (an acknowledgement).
ANSWERS_NOTHING = {"dossier.runhost.files.write_plan", "dossier.runhost.external.write"}


def model_title(schema: dict[str, Any]) -> str:
    """The model a `data` schema names: pydantic titles each model's schema with the class name."""
    return str(resolve(schema["$ref"])["title"])


def test_the_committed_document_is_the_one_the_contracts_make() -> None:
    assert asyncapi.render() == asyncapi.DOCUMENT.read_text(), "docs/asyncapi.json is stale: run `make generated`"


def test_a_contract_change_changes_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifact.GET, "description", "A description the committed document does not have.")
    assert asyncapi.render() != asyncapi.DOCUMENT.read_text()


def test_every_subject_has_its_own_request_and_reply_from_its_contract() -> None:
    operations = COMMITTED["operations"]
    received = {name for name, op in operations.items() if op["action"] == "receive"}
    declared: dict[str, Subject[Any, Any]] = {
        s.name: s for subjects in registry.contract_subjects().values() for s in subjects
    }
    assert received == set(declared)
    requests_by_schema: dict[str, set[type[Any]]] = defaultdict(set)
    envelopes: set[str] = set()
    for name, subject in declared.items():
        operation = operations[name]
        assert operation["summary"] == subject.description != "", name
        assert operation["bindings"]["nats"]["queue"] == subject.service
        request = payload(operation["messages"][0]["$ref"])
        assert {"actor", "data"} <= set(request["required"]), name
        assert model_title(request["properties"]["data"]) == subject.request.__name__, name
        requests_by_schema[json.dumps(request["properties"]["data"])].add(subject.request)
        reply = payload(operation["reply"]["messages"][0]["$ref"])
        envelopes |= {request["title"], reply["title"]}
        data = reply["properties"]["data"]
        if name in ANSWERS_NOTHING:
            assert subject.reply is type(None) and data["type"] == "null", name
        else:
            assert model_title(data["anyOf"][0]) == subject.reply.__name__, name
    # Two subjects share a request schema only when they take the same model; each has its own envelopes.
    assert all(len(models) == 1 for models in requests_by_schema.values())
    assert len(envelopes) == 2 * len(declared)


def test_each_service_serves_exactly_the_subjects_its_contract_declares() -> None:
    """Its app built (no I/O): the endpoints it registers (shared/bus.endpoint) and its health subscriber."""
    settings = {
        "workspace": WorkspaceSettings,
        "runhost": RunhostSettings,
        "publication": PublicationSettings,
        "artifact": ArtifactSettings,
        "assets": AssetsSettings,
    }
    for service, subjects in registry.contract_subjects().items():
        runtime = importlib.import_module(f"services.{service}.app").create_app(settings[service]())
        served = [spec.subject.name for spec in described_endpoints(runtime.broker)]
        served += [subscriber.subject.broker_address for subscriber in runtime.broker.subscribers]
        assert sorted(served) == sorted(s.name for s in subjects), service


def test_every_event_type_of_the_contracts_is_described_with_its_payload() -> None:
    events = {e.name: e for e in registry.contract_events()}
    for contract in registry.CONTRACTS:
        constants = {name: value for name, value in vars(contract).items() if name.startswith("EVT_")}
        assert all(isinstance(value, EventType) for value in constants.values()), contract.__name__
        assert {value.name for value in constants.values()} <= set(events)
    sent = {name for name, op in COMMITTED["operations"].items() if op["action"] == "send"}
    assert sent == {e.subject for e in events.values()}
    for event_type in events.values():
        operation = COMMITTED["operations"][event_type.subject]
        assert operation["summary"] == event_type.description != "", event_type
        envelope = payload(operation["messages"][0]["$ref"])
        assert envelope["properties"]["type"]["const"] == event_type.name
        assert model_title(envelope["properties"]["data"]) == event_type.payload.__name__
        assert set(envelope["properties"]) == set(common.Event.model_fields)


def test_the_headers_are_the_ones_the_code_sends() -> None:
    assert "correlationId" not in asyncapi.DOCUMENT.read_text()
    health = {f"{health_subject(service)}.Reply" for service in SERVICES}
    for name, message in COMMITTED["components"]["messages"].items():
        if name.endswith(".Request"):
            assert message["headers"] == asyncapi.REQUEST_HEADERS, name
        elif name.endswith(".Batch"):
            assert message["headers"] == asyncapi.BATCH_HEADERS, name
        elif name.endswith(".BatchReply"):
            assert "headers" not in message, name
        elif name in health:
            assert message["headers"] == asyncapi.HEALTH_REPLY_HEADERS, name
        elif name.endswith(".Reply"):
            assert "headers" not in message, name
        else:
            assert message["headers"] == asyncapi.EVENT_HEADERS, name
    assert set(asyncapi.REQUEST_HEADERS["properties"]) == {"traceparent", "tracestate", "baggage"}
    assert asyncapi.BATCH_HEADERS["required"] == [BATCH_HEADER]


def test_a_batched_subject_and_only_one_describes_its_batch() -> None:
    batched = {s.name for subjects in registry.contract_subjects().values() for s in subjects if s.batched}
    assert "dossier.publication.read" in batched
    for name, channel in COMMITTED["channels"].items():
        if name in batched:
            assert set(channel["messages"]) == {"request", "batch"}, name
            replies = [m["$ref"].rsplit("/", 1)[1] for m in COMMITTED["operations"][name]["reply"]["messages"]]
            assert replies == [f"{name}.Reply", f"{name}.BatchReply"]
        elif name != asyncapi.INBOX and "request" in channel["messages"]:
            assert set(channel["messages"]) == {"request"}, name
    assert asyncapi.EVENT_HEADERS["required"] == ["Nats-Msg-Id"]


def test_the_declared_trace_headers_are_all_the_propagator_writes() -> None:
    """A traced request or event carries what shared/tracing.inject_headers writes: each of those is declared."""
    span = SpanContext(
        0x0AF7651916CD43DD8448EB211C80319C,
        0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("vendor", "value")]),
    )
    token = context.attach(baggage.set_baggage("tenant", "t1", trace.set_span_in_context(NonRecordingSpan(span))))
    try:
        headers = tracing.inject_headers()
    finally:
        context.detach(token)
    assert set(headers) == set(asyncapi.TRACE_HEADERS)
    jsonschema.validate(headers, asyncapi.REQUEST_HEADERS)
    jsonschema.validate(headers | {"Nats-Msg-Id": "evt_1"}, asyncapi.EVENT_HEADERS)


def test_no_two_contract_models_share_a_name() -> None:
    """The document names schemas by class: two models of one name would describe each other's subjects."""
    from collections import Counter

    names = Counter(
        value.__name__
        for module in (*registry.CONTRACTS, common, gateway, mcp)
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__
    )
    assert [name for name, count in names.items() if count > 1] == []
