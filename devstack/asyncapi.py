"""The bus's AsyncAPI 3.1 document, written from the contracts (shared/contracts).

Every `Subject` a contract module declares is a channel its owner receives on, in the owner's queue group:
its request message is the request envelope around the subject's own request model, and its reply, sent to
the requester's inbox, is the reply envelope around its reply model. Every `EventType` is a channel its owner
sends on through the outbox (shared/outbox.py) into stream DOSSIER_EVENTS: the event envelope around its
payload model. The headers are the ones a receiver gets: a request carries only the trace context, when
tracing is on (shared/bus.py, shared/tracing.py); a reply none, but for FastStream's on a health reply; an
event its id as `Nats-Msg-Id`, and the trace context. `python -m devstack.generated` writes
`docs/asyncapi.json`; a test regenerates it and fails on any difference.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, create_model
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from shared.batching import BATCH_HEADER, BATCH_MAX
from shared.contracts.common import (
    STREAM_NAME,
    Actor,
    BusRequest,
    ErrorBody,
    Event,
    EventType,
    Model,
    Subject,
    health_subject,
)
from shared.contracts.registry import contract_events, contract_subjects

DOCUMENT = Path(__file__).resolve().parents[1] / "docs" / "asyncapi.json"
SCHEMA = "#/components/schemas/{model}"
SERVER = {"$ref": "#/servers/nats"}
# The NATS bindings' version (github.com/asyncapi/bindings, nats): an operation's `queue` group.
NATS_BINDING = "0.1.0"
# The channel of every reply: the requester's inbox, a subject only the requester knows.
INBOX = "inbox"

# The W3C trace context (and baggage) of the caller's trace, as `opentelemetry.propagate.inject` writes it.
TRACE_HEADERS: dict[str, Any] = {
    "traceparent": {
        "type": "string",
        "pattern": "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$",
        "description": "W3C Trace Context: the trace and span this message continues.",
    },
    "tracestate": {"type": "string", "description": "W3C Trace Context, when the trace carries vendor state."},
    "baggage": {"type": "string", "description": "W3C Baggage, when the trace carries some."},
}
REQUEST_HEADERS: dict[str, Any] = {
    "type": "object",
    "description": "Only with tracing on (shared/tracing.py): the caller's trace context. Nothing else.",
    "properties": TRACE_HEADERS,
    "additionalProperties": False,
}
# A health subject is answered by a FastStream subscriber (shared/bus.py `health_endpoint`), which adds its own
# headers to the reply: a correlation id it makes up for the request, and an empty content type. The other
# replies carry none (shared/serving.py).
HEALTH_REPLY_HEADERS: dict[str, Any] = {
    "type": "object",
    "description": "FastStream's own; nothing a requester needs.",
    "properties": {
        "correlation_id": {"type": "string", "description": "Made up by FastStream for the request it answers."},
        "content-type": {"const": "", "description": "Empty: FastStream does not name the reply's type."},
    },
    "required": ["correlation_id", "content-type"],
    "additionalProperties": False,
}
# A batch of requests on a batched subject (shared/batching.py), and its reply.
BATCH_HEADERS: dict[str, Any] = {
    "type": "object",
    "description": "How many request envelopes the batch holds.",
    "properties": {
        BATCH_HEADER: {"type": "string", "pattern": "^[0-9]{1,3}$", "description": f"1 to {BATCH_MAX}."},
    },
    "required": [BATCH_HEADER],
    "additionalProperties": False,
}
FRAMES = (
    "{n} frames, each a 4-byte big-endian length and then one {what} exactly as it goes alone (JSON), in the "
    "order of the requests."
)


def _batch_message(name: str, summary: str, payload: str, headers: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "name": name,
        "title": name,
        "summary": summary,
        "contentType": "application/octet-stream",
        "payload": {"type": "string", "format": "binary", "description": payload},
    }
    if headers is not None:
        message["headers"] = headers
    return message


EVENT_HEADERS: dict[str, Any] = {
    "type": "object",
    "description": "Set by the outbox relay (shared/outbox.py): the event's id, so the stream drops a second "
    "message of the same id within its duplicate window; with tracing on, the trace context of the change that "
    "caused the event. (The relay's `Nats-Expected-Stream` is the server's check at publish, not stored.)",
    "properties": {"Nats-Msg-Id": {"type": "string", "description": "The event's `id`."}, **TRACE_HEADERS},
    "required": ["Nats-Msg-Id"],
    "additionalProperties": False,
}


def _name(subject: str, suffix: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[._]", subject.removeprefix("dossier."))) + suffix


def _request_envelope(subject: Subject[Any, Any]) -> type[BaseModel]:
    fields = BusRequest.model_fields
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
                description="The caller's Ed25519 signature over the actor, subject, request id, a digest of the "
                "grant and payload, a single-use id and an expiry (docs/security.md, Proof of caller); a request "
                "without a valid one, or with one already used, is answered `forbidden`",
            ),
        ),
        grant=(str | None, Field(default=None, description="A run grant, for reads made on behalf of a run")),
        request_id=(str | None, fields["request_id"]),
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


def _event_envelope(event_type: EventType[Any]) -> type[BaseModel]:
    fields = Event.model_fields
    return create_model(
        _name(event_type.subject, "Event"),
        __base__=Model,
        __doc__=f"`{event_type}`: {event_type.description}",
        id=(str, Field(description="Unique per event; also its `Nats-Msg-Id`.")),
        type=(Literal[event_type.name], ...),  # type: ignore[valid-type,arg-type]
        scope=(str, ...),
        occurred_at=(datetime, fields["occurred_at"]),
        data=(event_type.payload, ...),
        request_id=(str | None, fields["request_id"]),
    )


def _schemas(models: list[tuple[type[BaseModel], JsonSchemaMode]]) -> dict[str, Any]:
    """The JSON Schema of every model, named as pydantic names them: a model whose input and output differ
    (an alias, a default) gets one of each, so a request is described as taken and a reply as written."""
    _, top = models_json_schema(models, ref_template=SCHEMA)
    return dict(top["$defs"])


def _message(name: str, envelope: type[BaseModel], summary: str, headers: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "name": name,
        "title": name,
        "summary": summary,
        "contentType": "application/json",
        "payload": {"$ref": SCHEMA.format(model=envelope.__name__)},
    }
    if headers is not None:
        message["headers"] = headers
    return message


def build() -> dict[str, Any]:
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    inbox: dict[str, Any] = {}
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = []
    for service, subjects in contract_subjects().items():
        for subject in subjects:
            request, reply = _request_envelope(subject), _reply_envelope(subject)
            models += [(request, "validation"), (reply, "serialization")]
            asked, answered = f"{subject}.Request", f"{subject}.Reply"
            messages[asked] = _message(asked, request, f"A `{subject}` request.", REQUEST_HEADERS)
            headers = HEALTH_REPLY_HEADERS if subject == health_subject(service) else None
            messages[answered] = _message(answered, reply, f"The reply to `{subject}`.", headers)
            inbox[answered] = {"$ref": f"#/components/messages/{answered}"}
            requests = {"request": {"$ref": f"#/components/messages/{asked}"}}
            replies = [{"$ref": f"#/channels/{INBOX}/messages/{answered}"}]
            if subject.batched:
                batch, batch_reply = f"{subject}.Batch", f"{subject}.BatchReply"
                messages[batch] = _batch_message(
                    batch,
                    f"`{subject}` requests asked for together (shared/batching.py).",
                    FRAMES.format(n=f"`{BATCH_HEADER}`", what=f"`{asked}`"),
                    BATCH_HEADERS,
                )
                messages[batch_reply] = _batch_message(
                    batch_reply,
                    f"The replies to a `{batch}`; a batch that is not well framed gets one `{answered}` instead.",
                    FRAMES.format(n="As many", what=f"`{answered}`"),
                    None,
                )
                requests["batch"] = {"$ref": f"#/components/messages/{batch}"}
                inbox[batch_reply] = {"$ref": f"#/components/messages/{batch_reply}"}
                replies.append({"$ref": f"#/channels/{INBOX}/messages/{batch_reply}"})
            channels[subject.name] = {
                "address": subject.name,
                "title": subject.name,
                "description": subject.description,
                "messages": requests,
                "servers": [SERVER],
            }
            operations[subject.name] = {
                "action": "receive",
                "title": subject.name,
                "summary": subject.description,
                "description": f"The {service} service answers in its queue group `{service}`.",
                "channel": {"$ref": f"#/channels/{subject}"},
                "messages": [{"$ref": f"#/channels/{subject}/messages/{name}"} for name in requests],
                "reply": {"channel": {"$ref": f"#/channels/{INBOX}"}, "messages": replies},
                "bindings": {"nats": {"queue": service, "bindingVersion": NATS_BINDING}},
            }
    channels[INBOX] = {
        "address": None,
        "title": "The requester's inbox",
        "description": "The reply subject of a request (`_INBOX_<process>.…`): its owner sends its one reply there.",
        "messages": inbox,
        "servers": [SERVER],
    }
    for event_type in contract_events():
        envelope = _event_envelope(event_type)
        models.append((envelope, "serialization"))
        address = event_type.subject
        messages[address] = _message(address, envelope, event_type.description, EVENT_HEADERS)
        channels[address] = {
            "address": address,
            "title": address,
            "description": f"{event_type.description} Stored in stream {STREAM_NAME}.",
            "messages": {"event": {"$ref": f"#/components/messages/{address}"}},
            "servers": [SERVER],
        }
        operations[address] = {
            "action": "send",
            "title": address,
            "summary": event_type.description,
            "description": f"Published by the outbox relay of its owner, once per `{event_type}` event.",
            "channel": {"$ref": f"#/channels/{address}"},
            "messages": [{"$ref": f"#/channels/{address}/messages/event"}],
        }
    return {
        "asyncapi": "3.1.0",
        "info": {
            "title": "Dossier bus",
            "version": "1",
            "description": "Request/reply subjects (one queue group per service; every request is answered once) "
            f"and the events each service publishes through its outbox into JetStream stream {STREAM_NAME}.",
        },
        "defaultContentType": "application/json",
        "servers": {
            "nats": {
                "host": "{host}",
                "protocol": "nats",
                "description": "A stack's NATS: the local stack names it in $DOSSIER_HOME/stack.json (`nats_url`), "
                "and an outside subscriber's in nats/events.json.",
                "variables": {"host": {"default": "127.0.0.1:4222", "description": "The client address."}},
            }
        },
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": _schemas(models)},
    }


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"
