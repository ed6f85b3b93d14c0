"""docs/asyncapi.json against a running stack: every request subject it declares is answered there (no
"no responders") with a reply its schema describes, and every event on the stream is of a declared type,
fits that type's schema and carries only the declared headers."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from typing import Any

import jsonschema
import nats
from nats.errors import NoRespondersError

from shared.batching import BATCH_HEADER, frames, unframe
from shared.contracts.common import SERVICES
from tests.support.api import Api
from tests.support.asyncapi import COMMITTED, message
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.probe import probe_until
from tests.support.stack import RunningStack
from tests.support.subscribers import ext_subscription

# What the workload below makes happen, each at least once in its own scope.
WORKLOAD_EVENTS = {
    "workspace.created",
    "workspace.goal_revised",
    "workspace.archived",
    "workspace.unarchived",
    "workspace.checkpoint_revised",
    "workspace.deleted",
    "publication.committed",
    "publication.revised",
    "publication.withdrawn",
    "asset.version_activated",
    "asset.association_requested",
    "asset.source_retired",
    "run.admitted",
    "run.started",
    "run.completed",
    "artifact.registered",
    "artifact.retained",
}


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def check(instance: Any, schema: dict[str, Any]) -> None:
    """Validate against a schema of the document, its references resolved within the document."""
    jsonschema.validate(
        instance,
        {**schema, "components": COMMITTED["components"]},
        cls=jsonschema.Draft202012Validator,
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )


def check_headers(headers: dict[str, str] | None, declared: dict[str, Any] | None, where: str) -> None:
    if declared is None:
        assert not headers, f"{where} carries headers the document does not declare: {headers}"
    else:
        check(headers or {}, declared)


async def test_every_declared_subject_is_answered_with_a_reply_of_its_schema(stack: RunningStack) -> None:
    by_service: dict[str, list[str]] = defaultdict(list)
    for name, operation in COMMITTED["operations"].items():
        if operation["action"] == "receive":
            by_service[operation["bindings"]["nats"]["queue"]].append(name)
    assert set(by_service) == set(SERVICES)
    unanswered: list[str] = []
    for service, subjects in by_service.items():
        # A service's own user may ask its own subjects; an empty body is answered too (`invalid`).
        nc = await nats.connect(**stack.nats_options(service))
        try:
            for subject in subjects:
                try:
                    # With a trace context, as a traced caller sends it: the reply declares no headers of it.
                    reply = await nc.request(subject, b"{}", timeout=30, headers={"traceparent": TRACEPARENT})
                except NoRespondersError:
                    unanswered.append(subject)
                    continue
                described = message(COMMITTED["operations"][subject]["reply"]["messages"][0]["$ref"])
                check(json.loads(reply.data), described["payload"])
                check_headers(reply.headers, described.get("headers"), f"the reply to {subject}")
                if "batch" in COMMITTED["channels"][subject]["messages"]:
                    # A batch of two such bodies: two replies of the same schema, framed.
                    batch = await nc.request(subject, frames([b"{}", b"{}"]), headers={BATCH_HEADER: "2"}, timeout=30)
                    for part in unframe(batch.data, 2):
                        check(json.loads(part), described["payload"])
                    check_headers(batch.headers, None, f"the reply to a batch of {subject}")
        finally:
            await nc.close()
    assert unanswered == []


def test_the_events_a_workload_publishes_are_declared_and_fit_their_schemas(stack: RunningStack) -> None:
    api = Api(stack)
    ws = api.workspace()
    api.ok("PUT", f"/v1/workspaces/{ws['id']}/goal", json={"text": "Assess Fund X again", "expected_version": 1})
    api.ok("POST", f"/v1/workspaces/{ws['id']}/archive")
    api.ok("POST", f"/v1/workspaces/{ws['id']}/unarchive")
    report = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    api.revise(report["id"], "Fund X liquidity is now weaker.", 1)
    api.ok("POST", f"/v1/publications/{report['id']}/versions/1/withdraw", json={"reason": "superseded"})
    api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    run = api.start_run(ws["id"], "Does Fund X meet redemptions?")
    assert api.wait_run(run["id"])["status"] == "completed"
    api.ok("POST", "/v1/sources/announcement/retire")
    api.ok("DELETE", f"/v1/workspaces/{ws['id']}")
    events = asyncio.run(stream_events(stack, api.scope))
    assert WORKLOAD_EVENTS - {data["type"] for _, _, data in events if data["scope"] == api.scope} == set()
    declared = {op["channel"]["$ref"].split("/")[-1]: op for op in COMMITTED["operations"].values()}
    for subject, headers, data in events:
        assert subject in declared and declared[subject]["action"] == "send", subject
        described = message(declared[subject]["messages"][0]["$ref"])
        check(data, described["payload"])
        assert subject == f"dossier.evt.{data['type']}"
        # The headers of the events the services' relays published: other tests on this stack publish copies
        # of events as a crashed relay could (tests/e2e/test_drift.py, without the id, so the stream keeps them).
        if data["scope"] == api.scope:
            check_headers(headers, described["headers"], f"event {data['id']}")
            assert headers["Nats-Msg-Id"] == data["id"]


async def stream_events(stack: RunningStack, scope: str) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    """Every event on the stream, as an outside subscriber reads it, once the workload's last one is there."""
    nc = await nats.connect(**stack.events_options())
    events: list[tuple[str, dict[str, str], dict[str, Any]]] = []
    try:
        sub = await ext_subscription(nc, "dossier.evt.>")

        async def workload_seen() -> bool:
            try:
                batch = await sub.fetch(256, timeout=1.0)
            except (nats.errors.TimeoutError, TimeoutError):
                batch = []
            for msg in batch:
                events.append((msg.subject, dict(msg.headers or {}), json.loads(msg.data)))
                await msg.ack()
            mine = {data["type"] for _, _, data in events if data["scope"] == scope}
            return WORKLOAD_EVENTS <= mine

        try:
            await probe_until(workload_seen, timeout=60)
        except AssertionError:
            pass  # the caller names what is missing
    finally:
        await nc.close()
    return events
