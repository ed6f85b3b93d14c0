"""Request/reply over NATS with one typed envelope: the caller (`BusClient`), the rules' marks (`answers`),
and `dispatch`, which answers each request the service's subscriptions receive (shared/serving.py).

Every request gets a reply: `dispatch` parses the body itself (FastStream would drop the reply on a body it
cannot validate), so a malformed payload answers `invalid`, a rule's refusal answers its DomainError, and
anything unexpected answers `internal` without a trace. Events are not served here (shared/events.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Required, TypedDict, TypeVar, Unpack

import orjson
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from shared import tracing
from shared.batching import BATCH_HEADER, BadBatch, Batcher, fitted, frames, unframe
from shared.contracts.common import (
    Actor,
    BusReply,
    BusRequest,
    ErrorBody,
    HealthReply,
    Model,
    Q,
    R,
    Subject,
    health_subject,
)
from shared.db import session_lost
from shared.errors import LOST_SESSION, DomainError, Invalid, Timeout, Unreachable, from_envelope, plain_problem
from shared.metrics import BUS_CALLS, BUS_REQUESTS, BUS_SECONDS
from shared.observe import HandledLog, bound, new_request_id, request_id_var
from shared.proof import ProofSigner, ProofVerifier
from shared.storable import require_storable

if TYPE_CHECKING:
    # Only services register endpoints; the gateway, a caller only, never loads FastStream.
    from faststream.nats import NatsBroker

log = logging.getLogger("dossier.bus")
# One line per handled request (shared/observe.HandledLog); its own logger, so an operator can silence it alone.
HANDLED = HandledLog(logging.getLogger("dossier.handled"))


@dataclass(frozen=True)
class RequestContext:
    actor: Actor
    grant: str | None
    subject: str
    # The signer that vouched for the actor (shared/proof.py): `gateway`, `runhost` or `workspace`.
    issuer: str


Handler = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True)
class EndpointSpec:
    """One request subject a service serves: what the runtime subscribes (shared/serving.py)."""

    subject: Subject[Any, Any]
    queue: str
    handler: Handler
    concurrency: int = 1


# Per broker, the endpoints registered on it (the runtime serves them; the AsyncAPI generator reads them).
_ENDPOINTS: weakref.WeakKeyDictionary[NatsBroker, list[EndpointSpec]] = weakref.WeakKeyDictionary()


def described_endpoints(broker: NatsBroker) -> list[EndpointSpec]:
    return list(_ENDPOINTS.get(broker, []))


def validation_details(exc: ValidationError, prefix: str = "") -> dict[str, Any]:
    errors = exc.errors()
    loc = tuple(errors[0]["loc"]) if errors else ()
    field = ".".join(str(p) for p in (prefix, *loc) if p != "")
    return {"field": field or prefix or "body", "problem": plain_problem(errors[0]) if errors else "is not valid"}


def _encode(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


# Every answer that is not a refusal is this, the data's JSON, and `}` (`_ok_reply`), so `call_json` can pass
# the data on without decoding it.
_OK_PREFIX = b'{"ok":true,"data":'
# A reply written as a whole BusReply (by a program other than this module) has its error field after the
# data. No JSON value ends in `,"error":null`, so no reply of the form above ends in this.
_BUS_REPLY_TAIL = b',"error":null}'


def _ok_reply(result: Any) -> bytes:
    """The reply envelope with its data encoded once, not dumped to a dict, wrapped and dumped again."""
    if isinstance(result, BaseModel):
        return _OK_PREFIX + result.model_dump_json().encode() + b"}"
    try:
        return _OK_PREFIX + orjson.dumps(_encode(result)) + b"}"
    except TypeError:
        # What orjson does not take (an int over 64 bits, a non-string key), pydantic's encoder does.
        return _OK_PREFIX + to_json(_encode(result)) + b"}"


def _reply_error(err: DomainError) -> bytes:
    reply = BusReply(ok=False, error=ErrorBody(code=err.code, message=err.message, details=err.details))
    return reply.model_dump_json().encode()


async def dispatch(raw: bytes, subject: Subject[Any, Any], handler: Handler, verifier: ProofVerifier) -> bytes:
    """Decode, check the proof of caller, call the rule, encode. Never raises: every outcome becomes a reply."""
    started = time.perf_counter()
    try:
        request = BusRequest.model_validate_json(raw)
    except ValidationError as exc:
        err = _unstorable(raw) or Invalid("the request envelope is malformed", validation_details(exc))
        reply, code = _reply_error(err), "invalid"
        request_id = scope = None
    else:
        request_id, scope = request.request_id, request.actor.scope
        with bound(request_id=request_id, scope=scope):
            reply, code = await _answer(request, subject, handler, verifier)
    seconds = time.perf_counter() - started
    BUS_REQUESTS.labels(subject, code).inc()
    BUS_SECONDS.labels(subject).observe(seconds)
    ms = round(seconds * 1000, 2)
    fields = {"subject": subject, "outcome": code, "duration_ms": ms, "request_id": request_id, "scope": scope}
    HANDLED.write(subject, fields, "%s %s in %.2f ms", subject, code, ms, routine=code == "ok")
    return reply


async def dispatch_batch(
    raw: bytes,
    count: int | BadBatch,
    subject: Subject[Any, Any],
    handler: Handler,
    verifier: ProofVerifier,
    *,
    limit: int,
) -> bytes:
    """Each envelope of a batch (shared/batching.py) answered as `dispatch` answers one, the replies framed in
    order within `limit` bytes (those left out empty); a batch that is not well framed, or whose header
    (`count`, read on arrival) is no count, is answered with one `invalid` reply, not framed."""
    try:
        if isinstance(count, BadBatch):
            raise count
        parts = unframe(raw, count)
    except BadBatch as exc:
        BUS_REQUESTS.labels(subject, "invalid").inc()
        log.info("%s answered invalid: %s", subject, exc)
        return _reply_error(Invalid("the batch is malformed", {"field": BATCH_HEADER, "problem": str(exc)}))
    replies = await asyncio.gather(*(dispatch(part, subject, handler, verifier) for part in parts))
    return frames(fitted(list(replies), limit))


async def _answer(
    request: BusRequest, subject: Subject[Any, Any], handler: Handler, verifier: ProofVerifier
) -> tuple[bytes, str]:
    try:
        # No rule sees a request whose actor no trusted signer vouched for, not even to validate it.
        issuer = verifier.check(request, subject)
        # Text PostgreSQL cannot store is the sender's mistake: answer `invalid` before any rule sees it.
        require_storable(request.data)
        require_storable(request.actor.principal, "actor.principal")
        try:
            payload = subject.request.model_validate(request.data)
        except ValidationError as exc:
            raise Invalid("the request is malformed", validation_details(exc)) from exc
        ctx = RequestContext(actor=request.actor, grant=request.grant, subject=subject, issuer=issuer)
        result = await handler(ctx, payload)
        return _ok_reply(result), "ok"
    except DomainError as err:
        log.info("%s answered %s: %s", subject, err.code, err.message)
        return _reply_error(err), err.code
    except Exception as exc:
        if session_lost(exc):
            # The database restarting, or an operator ending sessions: what the request did is not known.
            log.warning("handler for %s lost its database session: %r", subject, exc)
            return _reply_error(Timeout(LOST_SESSION)), Timeout.code
        log.exception("handler for %s failed", subject)
        return _reply_error(DomainError("the service failed to handle the request", code="internal")), "internal"


def _unstorable(raw: bytes) -> Invalid | None:
    """pydantic refuses a lone surrogate as bad JSON; the stdlib decodes it, so the field can be named."""
    try:
        decoded = json.loads(raw)
        if isinstance(decoded, dict):
            require_storable(decoded.get("data"))
            require_storable(decoded.get("actor"), "actor")
    except Invalid as err:
        return err
    except ValueError:
        pass
    return None


# A subscription hands over one message at a time; one at a time, ten concurrent 100 ms requests took
# 1.04 s, against 0.11 s when each is answered in its own task. shared/serving.py answers up to this many.
HANDLER_CONCURRENCY = 32


def endpoint(
    broker: NatsBroker,
    subject: Subject[Q, R],
    handler: Callable[[RequestContext, Q], Awaitable[R]],
    *,
    queue: str,
    concurrency: int = HANDLER_CONCURRENCY,
) -> None:
    """Serve `handler(ctx, request) -> reply` on `subject` in a queue group, behind the envelope.

    The runtime serves it on the broker's connection when it starts (shared/serving.py), not through
    FastStream's subscriber: that path cost about a fifth of a read (issue 14's profile).
    """
    _ENDPOINTS.setdefault(broker, []).append(EndpointSpec(subject, queue, handler, concurrency))


S = TypeVar("S")
Rule = Callable[[S, RequestContext, Q], Awaitable[R]]
# The attribute `answers` marks a rule method with: the subject it answers.
_ANSWERS = "__answers__"


def answers(subject: Subject[Q, R]) -> Callable[[Rule[S, Q, R]], Rule[S, Q, R]]:
    """Mark a rule method `(self, ctx, request) -> reply` as the answer to `subject`, where the rule is declared.

    Typed so a method whose request is not the subject's request model, or whose reply is not its reply
    model, fails the type check. The runtime serves every marked method of the objects it is given
    (`ServiceRuntime.serve_rules`).
    """

    def mark(method: Rule[S, Q, R]) -> Rule[S, Q, R]:
        return set_mark(method, _ANSWERS, subject, "answers")

    return mark


M = TypeVar("M")
F = TypeVar("F", bound=Callable[..., Any])


def set_mark(method: F, attribute: str, value: object, verb: str) -> F:
    """Mark `method` with `value` under `attribute`, once (`answers` here, `consumes` in shared/events.py)."""
    if hasattr(method, attribute):
        raise TypeError(f"{method.__qualname__} already {verb} {getattr(method, attribute)}")
    setattr(method, attribute, value)
    return method


def marked_methods(owner: object, attribute: str, kind: type[M]) -> list[tuple[M, Any]]:
    """Each `kind` a method of `owner`'s class is marked with under `attribute`, with that method bound to `owner`."""
    found = []
    for name in dir(type(owner)):
        value = getattr(getattr(type(owner), name, None), attribute, None)
        if isinstance(value, kind):
            found.append((value, getattr(owner, name)))
    return found


def rules_of(owner: object) -> list[tuple[Subject[Any, Any], Handler]]:
    """Each subject a method of `owner`'s class answers (marked by `answers`), with that method bound to `owner`."""
    return marked_methods(owner, _ANSWERS, Subject)


def health_endpoint(broker: NatsBroker, service: str, problem: Callable[[], str | None] = lambda: None) -> None:
    """`problem()`: why the service cannot do part of its work (None when it can)."""

    async def on_health() -> bytes:
        reason = problem()
        reply = HealthReply(service=service, status="ok" if reason is None else "degraded", reason=reason)
        return _ok_reply(reply)

    broker.subscriber(health_subject(service), queue=service)(on_health)


def _encode_envelope(envelope: dict[str, Any]) -> bytes:
    """What orjson does not encode: a lone surrogate (named as bad input, not failed as a fault), or a
    value only pydantic's encoder takes."""
    try:
        return BusRequest.model_validate(envelope).model_dump_json().encode()
    except PydanticSerializationError:
        require_storable(envelope["data"])
        raise


def _refusal(subject: str, reply: BusReply) -> DomainError:
    """The typed error a failed reply carries, counted under its code."""
    BUS_CALLS.labels(subject, reply.error.code if reply.error else "internal").inc()
    return from_envelope(reply.error.model_dump() if reply.error else {})


class CallOptions(TypedDict, total=False):
    """How a call is made: for whom (`actor`), on whose run's authority (`grant`), and how long to wait."""

    actor: Required[Actor]
    grant: str | None
    timeout: float | None


class BusClient:
    """The caller side: one method, typed errors. Uses the raw nats-py connection (lowest latency).

    With a signer, every envelope carries its proof of the actor (shared/proof.py); without one (a
    process that calls no other service), owners refuse whatever it sends for an actor.
    """

    def __init__(self, nc: NATS, *, timeout: float = 5.0, signer: ProofSigner | None = None):
        self._nc = nc
        self._timeout = timeout
        self._signer = signer
        # Per batched subject and timeout, the requests waiting to go out together (shared/batching.py).
        self._batchers: dict[tuple[str, float], Batcher] = {}

    async def call(self, subject: Subject[Q, R], data: Q, **how: Unpack[CallOptions]) -> R:
        """Ask the owner of `subject`; its reply's data as the subject's reply model. A refusal raises the
        DomainError it carries."""
        return subject.parse_reply(await self.call_raw(subject, data, **how))

    async def call_json(self, subject: Subject[Q, R], data: Q, **how: Unpack[CallOptions]) -> bytes:
        """Like `call`, but the reply's data as the JSON bytes the owner wrote (a `subject.reply`), for an edge
        that only passes it on: cut out of the reply, neither decoded nor encoded again."""
        raw = await self._request(subject, data, how)
        if raw.startswith(_OK_PREFIX) and raw.endswith(b"}") and not raw.endswith(_BUS_REPLY_TAIL):
            BUS_CALLS.labels(subject, "ok").inc()
            return raw[len(_OK_PREFIX) : -1]
        reply = BusReply.model_validate_json(raw)
        if not reply.ok:
            raise _refusal(subject, reply)
        BUS_CALLS.labels(subject, "ok").inc()
        return to_json(reply.data)

    async def call_raw(
        self, subject: str, data: BaseModel | dict[str, Any] | None = None, **how: Unpack[CallOptions]
    ) -> Any:
        """Any payload on any subject, the reply's data as decoded JSON: what a program outside the contracts
        sends (the tests' malformed requests). Services call through `call`."""
        reply = BusReply.model_validate_json(await self._request(subject, data, how))
        if not reply.ok:
            raise _refusal(subject, reply)
        BUS_CALLS.labels(subject, "ok").inc()
        return reply.data

    async def _request(self, subject: str, data: BaseModel | dict[str, Any] | None, how: CallOptions) -> bytes:
        # Only the fields the caller set: the owner fills in the same defaults, and can tell an omitted field
        # from one set to its default (an omitted checkpoint summary keeps the current one, a null clears it).
        payload = data.model_dump(mode="json", exclude_unset=True) if isinstance(data, BaseModel) else (data or {})
        actor, timeout = how["actor"], how.get("timeout") or self._timeout
        request_id = request_id_var.get() or new_request_id()
        grant = how.get("grant")

        async def envelope() -> bytes:
            """The envelope, with a proof of its own (single use: a request asked again needs another)."""
            proof = (
                await self._signer.prove_batched(subject, actor, request_id, data=payload, grant=grant)
                if self._signer is not None
                else None
            )
            fields = {
                "actor": actor.model_dump(),
                "proof": proof,
                "grant": grant,
                "request_id": request_id,
                "data": payload,
            }
            try:
                # The receiver validates the envelope; building a model here only to encode it cost a read a
                # tenth of its client-side time.
                return orjson.dumps(fields)
            except TypeError:
                return _encode_envelope(fields)

        body = await envelope()
        service = subject.split(".")[1] if subject.count(".") >= 2 else subject
        if tracing.enabled():
            with tracing.client_span(subject):
                return await self._send(subject, service, body, timeout, tracing.inject_headers())
        # A request of a batched subject (its requests have no effect) goes with those made at the same moment.
        if getattr(subject, "batched", False):
            return await self._batched(subject, service, timeout).request(body, envelope)
        return await self._send(subject, service, body, timeout, None)

    def _batched(self, subject: str, service: str, timeout: float) -> Batcher:
        batcher = self._batchers.get((subject, timeout))
        if batcher is None:
            batcher = self._batchers[(subject, timeout)] = Batcher(
                lambda data, headers: self._send(subject, service, data, timeout, headers)
            )
        return batcher

    async def _send(
        self, subject: str, service: str, body: bytes, timeout: float, headers: dict[str, str] | None
    ) -> bytes:
        try:
            msg = await self._nc.request(subject, body, timeout=timeout, headers=headers)
        except NoRespondersError as exc:
            BUS_CALLS.labels(subject, "unreachable").inc()
            raise Unreachable(f"the {service} service is not answering", {"service": service}) from exc
        except (TimeoutError, NatsTimeoutError) as exc:
            BUS_CALLS.labels(subject, "timeout").inc()
            raise Unreachable(f"the {service} service did not answer in time", {"service": service}) from exc
        return bytes(msg.data)

    async def ping(self, service: str, *, timeout: float = 1.0) -> bool:
        return await self.health(service, timeout=timeout) is not None

    async def health(self, service: str, *, timeout: float = 1.0) -> HealthReply | None:
        """The service's own word on its health; None when it does not answer."""
        try:
            return await self.call(health_subject(service), Model(), actor=SYSTEM_ACTOR, timeout=timeout)
        except DomainError:
            return None


SYSTEM_ACTOR = Actor(scope="system", principal="dossier")
