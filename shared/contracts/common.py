"""What every bus message carries: the actor, optional run grant, the reply envelope, events, refs."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, Strict
from pydantic_core import PydanticCustomError

SCOPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
# Versions, revisions and counts are PostgreSQL `integer` columns: a larger number is bad input, not a fault.
INT32_MAX = 2**31 - 1
# The longest id a path, a ref or a body may name; the OpenAPI document states the same bound.
ID_MAX_CHARS = 200


def _integral(value: Any) -> Any:
    # JSON Schema's `integer` (the OpenAPI document's) is any number without a fraction, so `3.0` is 3: a
    # JavaScript client cannot even write the two apart. `true`, `"3"` and `3.5` stay refused.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# A number a caller writes in a JSON body: `true`, `1.5` or `"60"` is not an integer.
Integral = BeforeValidator(_integral)
StrictInt = Annotated[int, Strict(), Integral]
# An optional bounded one is `Annotated[int, Strict(), Field(ge=…, le=…), Integral] | None`: bounds placed after
# the validator (`StrictInt | None = Field(le=…)`) reach the JSON Schema as `le`, not `maximum`.

# Every service that exists answers its health subject; the gateway's /v1/health asks each of these.
SERVICES: tuple[str, ...] = ("workspace", "runhost", "publication", "artifact", "assets")
ALL_PROCESSES: tuple[str, ...] = ("gateway", *SERVICES)

STREAM_NAME = "DOSSIER_EVENTS"
EVENT_SUBJECT_PREFIX = "dossier.evt"


def health_subject(service: str) -> Subject[Model, HealthReply]:
    return Subject(f"dossier.{service}.health", Model, HealthReply, f"Is the {service} service up?")


def event_subject(event_type: str) -> str:
    """`publication.committed` → `dossier.evt.publication.committed`."""
    return f"{EVENT_SUBJECT_PREFIX}.{event_type}"


# Some character that is not white space, as one explicit class: `\s` means three different sets in the
# schema's regular expressions (ECMA-262), in Python's (which adds U+001C-U+001F) and in pydantic's (Rust),
# so a text one of them takes for blank could pass another. This class is the union of all three.
NOT_BLANK = r"[^\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
_NOT_BLANK = re.compile(NOT_BLANK)


def _not_blank(value: str) -> str:
    if not _NOT_BLANK.search(value):
        raise PydanticCustomError("blank", "must not be blank (only spaces)")
    return value


# A question, a title or a goal: whitespace alone says nothing, and makes an empty, unclickable link.
# The schema says the same to clients.
Text = Annotated[str, AfterValidator(_not_blank), Field(json_schema_extra={"pattern": NOT_BLANK})]


class Model(BaseModel):
    # No message carries an infinite or NaN number: `1e400` or `Infinity` in a body is bad input.
    # Each model's validator is built at its first use: a process imports all of the contracts (the registry
    # names every subject) and uses a few of them, and building every one at import cost each process of a
    # start about 60 ms of processor time.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, defer_build=True)


class Actor(Model):
    scope: str = Field(pattern=SCOPE_PATTERN)
    principal: str = Field(min_length=1, max_length=200)


def id_field(description: str) -> Any:
    """An id a request names (1 to ID_MAX_CHARS characters), with what it is told to clients."""
    return Field(min_length=1, max_length=ID_MAX_CHARS, description=description)


RefKind = Literal["publication", "source", "artifact", "evidence"]


class Ref(Model):
    kind: RefKind = Field(
        description="What the ref names: a publication, a source, an artifact or an evidence passage."
    )
    id: str = Field(min_length=1, max_length=200, description="The id of what it names.")
    version: Annotated[int, Strict(), Field(le=INT32_MAX), Integral] | None = Field(
        default=None, description="The exact version; null where the kind has none (an evidence passage)."
    )

    def key(self) -> str:
        return f"{self.kind}:{self.id}@{self.version if self.version is not None else 'latest'}"


# The API's paging (docs/api.md): one definition of the paging fields, reused by every list request and reply.
PAGE_LIMIT_DEFAULT = 100
PAGE_LIMIT_MAX = 500
CURSOR_MAX_CHARS = 1000


class PageRequest(Model):
    """`limit` items after `cursor` (the `next_cursor` of the previous page; none for the first page)."""

    limit: int = Field(default=PAGE_LIMIT_DEFAULT, ge=1, le=PAGE_LIMIT_MAX, description="How many items at most.")
    cursor: str | None = Field(
        default=None,
        min_length=1,
        max_length=CURSOR_MAX_CHARS,
        description="The `next_cursor` of the previous page; leave it out for the first page.",
    )


class Page(Model):
    """A page of a list; `next_cursor` is null on the last page."""

    next_cursor: str | None = None


class PublicationRef(Model):
    """One publication at one exact version."""

    id: str = Field(min_length=1, max_length=200)
    version: int = Field(ge=1, le=INT32_MAX)


class BusRequest(Model):
    """The envelope of every request: who asks, on whose run's authority, and the payload."""

    actor: Actor
    # The caller's signature over the actor, subject, request id, grant and payload, usable once before its
    # expiry (shared/proof.py).
    proof: str | None = Field(default=None, max_length=4096)
    grant: str | None = None
    # The id of the HTTP request (or run step) this call serves; every service logs it.
    request_id: str | None = Field(default=None, max_length=128)
    data: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(Model):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorEnvelope(Model):
    """The body of every error answer of the HTTP API."""

    error: ErrorBody


class BusReply(Model):
    ok: bool
    data: Any = None
    error: ErrorBody | None = None


class Event(Model):
    """A fact that happened, as it travels on the stream. `id` is also the Nats-Msg-Id."""

    id: str
    type: str
    scope: str
    occurred_at: datetime
    data: dict[str, Any]
    # The request (or run step) that caused this fact, so each consumer's log line names it too.
    request_id: str | None = Field(
        default=None, max_length=128, description="The id of the request (or run step) that caused this event."
    )


class HealthReply(Model):
    service: str
    # "degraded": answering, but unable to do part of its work; `reason` says which and why.
    status: Literal["ok", "degraded"]
    reason: str | None = None


class Eligibility(Model):
    """One answer of a batch eligibility check (`<owner>.check`)."""

    ref: Ref
    available: bool
    reason: str | None = None
    title: str | None = None
    created_at: datetime | None = None
    run_id: str | None = None
    content_hash: str | None = None


class CheckRequest(Model):
    refs: list[Ref] = Field(max_length=1000)


class CheckReply(Model):
    items: list[Eligibility]


Q = TypeVar("Q", bound=Model)
R = TypeVar("R")
P = TypeVar("P", bound=Model)


class Subject(str, Generic[Q, R]):
    """One request subject: its name on the bus, the request model it takes and the reply it answers.

    The one definition both sides use: the owner serves it (`shared.bus.endpoint`), a caller asks it
    (`BusClient.call`), the bus permissions come from its callers, and the AsyncAPI document is written from
    it (devstack/asyncapi.py). It is its name
    as well, wherever a plain subject string is wanted (a subscription, a metric label, a log line).
    """

    request: type[Q]
    reply: type[R]
    description: str
    # The processes that may send it: their NATS users may publish to it, and the owner trusts their proof
    # of caller for it (shared/natsauth.py, shared/proof.py). A health subject names none: every process
    # may ask its own, and the gateway asks every service's.
    callers: tuple[str, ...]
    # Requests that wait at the same moment go out in one message (shared/batching.py). Only for requests that
    # change nothing: one whose reply does not fit its batch's message is asked for again.
    batched: bool

    def __new__(
        cls,
        name: str,
        request: type[Q],
        reply: type[R],
        description: str = "",
        *,
        callers: tuple[str, ...] = (),
        batched: bool = False,
    ) -> Subject[Q, R]:
        subject = super().__new__(cls, name)
        subject.request, subject.reply, subject.description = request, reply, description
        subject.callers, subject.batched = callers, batched
        return subject

    @property
    def name(self) -> str:
        return str.__str__(self)

    @property
    def service(self) -> str:
        """`dossier.assets.upload` → `assets`: the owner that answers it."""
        return self.split(".")[1]

    def parse_reply(self, data: Any) -> R:
        """The reply's `data`, as the model the owner answers with (None for a subject that answers nothing)."""
        if self.reply is type(None):
            return None
        return self.reply.model_validate(data)  # type: ignore[attr-defined, no-any-return]


class EventType(str, Generic[P]):
    """One kind of event: its type (`publication.committed`), the model of its `data`, and the services that
    follow it.

    `consumers` is the one declaration of a subscription: each consumer's NATS user may create and pull its
    durable for it (shared/natsauth.py), and the consumer's runtime refuses to start unless exactly these
    events have a handler marked `@consumes(...)` (shared/events.py).
    """

    payload: type[P]
    description: str
    consumers: tuple[str, ...]

    def __new__(cls, name: str, payload: type[P], description: str, *, consumers: tuple[str, ...] = ()) -> EventType[P]:
        event = super().__new__(cls, name)
        event.payload, event.description, event.consumers = payload, description, consumers
        return event

    @property
    def name(self) -> str:
        return str.__str__(self)

    @property
    def subject(self) -> str:
        """`publication.committed` → `dossier.evt.publication.committed`: where the outbox publishes it."""
        return event_subject(self)
