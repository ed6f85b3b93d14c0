"""The bus's AsyncAPI 3.0 document, generated from the code by FastStream's own generator.

Every service's app is built (no I/O), and the endpoints it registered (`shared.bus.endpoint`) and the
events its contract declares (`EVENTS` in each contract module) are declared on a documentation broker
with typed envelopes: a request subject's payload is the request envelope around its request model, its
reply is the reply envelope around the handler's return type, and an event's payload is the event
envelope around its data model. `python -m devstack.asyncapi` writes `docs/asyncapi.json`; a test
regenerates it and fails on any difference.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from faststream.nats import NatsBroker
from faststream.specification.asyncapi import AsyncAPI
from pydantic import BaseModel, Field, create_model

from shared.contracts import artifact, assets, publication, runhost, workspace
from shared.contracts.common import SERVICES, Actor, ErrorBody, Event, Model, Subject, event_subject, health_subject

DOCUMENT = Path(__file__).resolve().parents[1] / "docs" / "asyncapi.json"
CONTRACTS = (workspace, runhost, publication, artifact, assets)  # in the order of SERVICES
REF = "#/components/schemas/{model}"


def _name(subject: str, suffix: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[._]", subject.removeprefix("dossier."))) + suffix


def _request_envelope(subject: Subject[Any, Any]) -> type[BaseModel]:
    return create_model(
        _name(subject, "Request"),
        __base__=Model,
        __doc__=f"The envelope of a `{subject}` request.",
        actor=(Actor, ...),
        proof=(
            str | None,
            Field(
                default=None,
                max_length=4096,
                description="The caller's Ed25519 signature over the actor, subject, request id and an expiry "
                "(docs/security.md, Proof of caller); a request without a valid one is answered `forbidden`",
            ),
        ),
        grant=(str | None, Field(default=None, description="A run grant, for reads made on behalf of a run")),
        request_id=(str | None, Field(default=None, max_length=128)),
        data=(subject.request, ...),
    )


def _reply_envelope(subject: Subject[Any, Any]) -> type[BaseModel]:
    reply: Any = subject.reply
    return create_model(
        _name(subject, "Reply"),
        __base__=Model,
        __doc__=f"The reply to `{subject}`: `data` when ok, else the error.",
        ok=(bool, ...),
        data=(reply | None, None),
        error=(ErrorBody | None, None),
    )


def _event_envelope(event_type: str, payload: type[Model]) -> type[BaseModel]:
    return create_model(
        _name(event_subject(event_type), "Event"),
        __base__=Model,
        __doc__=f"`{event_type}`: published through the outbox with Nats-Msg-Id = id.",
        id=(str, ...),
        type=(Literal[event_type], ...),  # type: ignore[valid-type,arg-type]
        scope=(str, ...),
        occurred_at=(datetime, ...),
        data=(payload, ...),
        # The same field as the envelope shared/contracts/common.Event that the outbox publishes.
        request_id=(str | None, Event.model_fields["request_id"]),
    )


def contract_subjects() -> dict[str, list[Subject[Any, Any]]]:
    """Every request subject each service's contract declares, in the order it declares them, plus its health."""
    subjects: dict[str, list[Subject[Any, Any]]] = {}
    for service, contract in zip(SERVICES, CONTRACTS, strict=True):
        declared = [value for value in vars(contract).values() if isinstance(value, Subject)]
        subjects[service] = [s for s in declared if s.service == service] + [health_subject(service)]
    return subjects


def build() -> dict[str, Any]:
    docs = NatsBroker()
    replies: dict[str, type[BaseModel]] = {}
    for service, subjects in contract_subjects().items():
        for subject in subjects:
            envelope = _request_envelope(subject)

            async def handler(body: Any) -> None:
                return None

            # Bound now: a string annotation (this module's `from __future__ import annotations`) would be
            # read when the document is made, after the loop, and name the last envelope for every subject.
            handler.__annotations__ = {"body": envelope, "return": None}
            handler.__name__ = _name(subject, "")
            docs.subscriber(subject.name, queue=service, title=subject.name, description=subject.description)(handler)
            replies[subject.name] = _reply_envelope(subject)
    for contract in CONTRACTS:
        for event_type, payload in contract.EVENTS.items():
            address = event_subject(event_type)
            description = f"{payload.__doc__ or event_type}".strip()
            docs.publisher(address, schema=_event_envelope(event_type, payload), title=address, description=description)
    factory = AsyncAPI(
        docs,
        title="Dossier bus",
        version="1",
        description="Request/reply subjects (queue groups per service) and JetStream events (stream DOSSIER_EVENTS).",
        schema_version="3.0.0",
    )
    document: dict[str, Any] = factory.to_specification().to_jsonable()
    _add_replies(document, replies)
    return document


def _add_replies(document: dict[str, Any], replies: dict[str, type[BaseModel]]) -> None:
    """FastStream documents what a subscriber receives; the reply it sends is added as AsyncAPI 3 `reply`."""
    components = document["components"]
    for subject, model in replies.items():
        schema = model.model_json_schema(ref_template=REF)
        for name, definition in schema.pop("$defs", {}).items():
            components["schemas"].setdefault(name, definition)
        components["schemas"][model.__name__] = schema
        message = f"{subject}:Reply"
        components["messages"][message] = {
            "title": message,
            "payload": {"$ref": REF.format(model=model.__name__)},
        }
        document["operations"][subject]["reply"] = {
            "address": {"location": "$message.header#/reply", "description": "the requester's inbox"},
            "messages": [{"$ref": f"#/components/messages/{message}"}],
        }


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    DOCUMENT.parent.mkdir(parents=True, exist_ok=True)
    DOCUMENT.write_text(render())
    print(f"wrote {DOCUMENT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
