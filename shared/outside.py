"""Outside subscribers: NATS accounts of their own, a mirror of the event stream, and a guard on its
consumers.

The services and their durable consumers live in the internal account (`DOSSIER`). The mirror of the
event stream, `DOSSIER_EVENTS` in the `MIRROR` account, follows the internal stream and holds the
outside subscribers' consumers. The subscribers themselves connect as the `events` user of a third
account, `OUTSIDE`, which has no JetStream of its own: it imports, from `MIRROR`, only the API subjects
a pull consumer needs (stream and consumer info, next message, acks, delete), and its consumer-create
subjects lead to Dossier's consumer guard (shared.consumerguard), which makes a consumer only if it is
named `ext-*`, names it consistently, and delivers to no subject (pull only). So no subject form of the
JetStream API (the nameless `CONSUMER.CREATE` carrying a name in its body, a push consumer's
`deliver_subject`, a reply aimed at an inbox) reaches an internal consumer, an internal subject, or a
consumer not named `ext-*`.

What `DOSSIER` shares: the events as they are published (`dossier.evt.>`) with `OUTSIDE`, for plain
subscriptions; with `MIRROR`, the one API subject the mirror makes its consumer with (imported under
`$JS.dossier.API`, which no user may publish to), flow-control replies and the mirror's deliveries.
The `outside` user (the stack's, never handed out) declares the mirror and runs the guard.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.js import api

from shared.contracts.common import EVENT_SUBJECT_PREFIX, STREAM_NAME
from shared.secretfiles import write_secret
from shared.streams import with_leader

INTERNAL_ACCOUNT = "DOSSIER"
OUTSIDE_ACCOUNT = "OUTSIDE"
MIRROR_ACCOUNT = "MIRROR"
EVENTS_USER = "events"
# Declares the outside mirror at start; its password never leaves $DOSSIER_HOME.
OUTSIDE_ADMIN = "outside"
EXTERNAL_CONSUMER_PREFIX = "ext-"
JS_API = "$JS.API"
# The internal account's JetStream API as the outside account sees it (only the mirror uses it).
INTERNAL_API = "$JS.dossier.API"
MIRROR_DELIVERY = "dossier.outside.mirror"
GUARD_PREFIX = "dossier.guard"
# The consumers outside subscribers may hold on the mirror, all of them together (they share one user): the
# JetStream limit of the mirror's account, so the server refuses the next one whatever makes it.
MAX_CONSUMERS_SETTING = "DOSSIER_OUTSIDE_MAX_CONSUMERS"
MAX_CONSUMERS_DEFAULT = 100
# JetStream's error code for a create past that limit ("maximum consumers limit reached").
MAX_CONSUMERS_ERR_CODE = 10026
_MIRROR_CREATE_FORMS = (f"CONSUMER.CREATE.{STREAM_NAME}", f"CONSUMER.CREATE.{STREAM_NAME}.>")


def max_consumers(env: Mapping[str, str]) -> int:
    """The cap on the outside subscribers' consumers (`DOSSIER_OUTSIDE_MAX_CONSUMERS`, a positive number)."""
    raw = env.get(MAX_CONSUMERS_SETTING) or str(MAX_CONSUMERS_DEFAULT)
    if not raw.isdigit() or int(raw) < 1:
        raise SystemExit(f"{MAX_CONSUMERS_SETTING}={raw!r}: expected a whole number of at least 1")
    return int(raw)


def mirror_jetstream(cap: int) -> dict[str, Any]:
    """The mirror account's JetStream limits: only the number of consumers (the rest as the server's)."""
    return {"max_consumers": cap}


def internal_exports() -> list[dict[str, Any]]:
    mirror = [MIRROR_ACCOUNT]
    return [
        {"stream": f"{EVENT_SUBJECT_PREFIX}.>", "accounts": [OUTSIDE_ACCOUNT]},
        # 2.15 makes the mirror's consumer by the nameless form; other releases name it in the subject.
        *({"service": f"{JS_API}.{subject}", "accounts": mirror} for subject in _MIRROR_CREATE_FORMS),
        {"service": "$JS.FC.>", "accounts": mirror},
        {"stream": f"{MIRROR_DELIVERY}.>", "accounts": mirror},
    ]


def mirror_imports() -> list[dict[str, Any]]:
    source = INTERNAL_ACCOUNT
    return [
        *(
            {"service": {"account": source, "subject": f"{JS_API}.{subject}"}, "to": f"{INTERNAL_API}.{subject}"}
            for subject in _MIRROR_CREATE_FORMS
        ),
        {"service": {"account": source, "subject": "$JS.FC.>"}},
        {"stream": {"account": source, "subject": f"{MIRROR_DELIVERY}.>"}},
    ]


def _shared_api() -> list[str]:
    """The mirror's JetStream API subjects an outside subscriber uses directly (nothing that makes one)."""
    stream = STREAM_NAME
    return [
        f"{JS_API}.INFO",
        f"{JS_API}.STREAM.INFO.{stream}",
        f"{JS_API}.CONSUMER.INFO.{stream}.*",
        f"{JS_API}.CONSUMER.NAMES.{stream}",
        f"{JS_API}.CONSUMER.LIST.{stream}",
        f"{JS_API}.CONSUMER.DELETE.{stream}.*",
        f"$JS.ACK.{stream}.>",
    ]


# Consumer-create subject (as outside subscribers send it) → the guard's subject in `MIRROR`.
GUARDED: dict[str, str] = {
    f"{JS_API}.CONSUMER.CREATE.{STREAM_NAME}.*": f"{GUARD_PREFIX}.create.*",
    f"{JS_API}.CONSUMER.CREATE.{STREAM_NAME}.*.>": f"{GUARD_PREFIX}.create.*.>",
    f"{JS_API}.CONSUMER.DURABLE.CREATE.{STREAM_NAME}.*": f"{GUARD_PREFIX}.durable.*",
}
_NEXT = f"{JS_API}.CONSUMER.MSG.NEXT.{STREAM_NAME}.*"


def mirror_exports() -> list[dict[str, Any]]:
    only = [OUTSIDE_ACCOUNT]
    # A pull request is answered with many messages: a stream of responses.
    exports = [{"service": _NEXT, "response_type": "stream", "accounts": only}]
    exports += [{"service": subject, "accounts": only} for subject in _shared_api()]
    return [*exports, {"service": f"{GUARD_PREFIX}.>", "accounts": only}]


def outside_imports() -> list[dict[str, Any]]:
    mirror = MIRROR_ACCOUNT
    imports: list[dict[str, Any]] = [{"stream": {"account": INTERNAL_ACCOUNT, "subject": f"{EVENT_SUBJECT_PREFIX}.>"}}]
    imports += [{"service": {"account": mirror, "subject": s}} for s in [_NEXT, *_shared_api()]]
    return imports + [{"service": {"account": mirror, "subject": g}, "to": local} for local, g in GUARDED.items()]


def events_permissions() -> dict[str, Any]:
    """Read events; make (through the guard), use and delete `ext-*` pull consumers; nothing else.

    The nameless `CONSUMER.CREATE.<stream>`, whose name is in the body, is not allowed at all. There is
    no `allow_responses`: nothing this user receives asks for a reply it may give.
    """
    return {
        "publish": {"allow": [_NEXT, *_shared_api(), *GUARDED]},
        "subscribe": {"allow": [f"{EVENT_SUBJECT_PREFIX}.>", "_INBOX.>"]},
    }


def admin_permissions() -> dict[str, Any]:
    """The `outside` user: declares the mirror, and as the guard answers consumer-create requests by
    making the consumer on the mirror."""
    stream = STREAM_NAME
    api_subjects = [
        f"{JS_API}.INFO",
        f"{JS_API}.STREAM.INFO.{stream}",
        f"{JS_API}.STREAM.CREATE.{stream}",
        f"{JS_API}.CONSUMER.CREATE.{stream}.*",
        f"{JS_API}.CONSUMER.CREATE.{stream}.*.>",
        f"{JS_API}.CONSUMER.DURABLE.CREATE.{stream}.*",
    ]
    return {
        "publish": {"allow": api_subjects},
        "subscribe": {"allow": [f"{GUARD_PREFIX}.>", "_INBOX.>"]},
        "allow_responses": True,
    }


def mirror_config(replicas: int = 1) -> api.StreamConfig:
    source = api.StreamSource(name=STREAM_NAME, external=api.ExternalStream(api=INTERNAL_API, deliver=MIRROR_DELIVERY))
    return api.StreamConfig(
        name=STREAM_NAME,
        description="Dossier's events, mirrored for subscribers outside the system (read-only)",
        mirror=source,
        storage=api.StorageType.FILE,
        num_replicas=replicas,
    )


async def ensure_outside_stream(nc: NATS, *, replicas: int = 1) -> None:
    """Declare the mirror (as the `outside` user); it follows the internal stream from its first event,
    and catches up on its own after either side was away."""
    js = nc.jetstream()
    try:
        await js.stream_info(STREAM_NAME)
    except nats.js.errors.NotFoundError:
        try:
            await js.add_stream(mirror_config(replicas))
        except Exception:
            await js.stream_info(STREAM_NAME)


def write_events_descriptor(home: Path, servers: list[str], password: str) -> Path:
    """`$DOSSIER_HOME/nats/events.json`: how an outside subscriber connects (docs/api.md)."""
    path = home / "nats" / "events.json"
    write_secret(path, json.dumps({"servers": servers, "user": EVENTS_USER, "password": password}, indent=2) + "\n")
    return path


async def declare_outside_stream(
    servers: list[str], options: dict[str, Any], replicas: int, timeout: float = 60.0
) -> None:
    """The outside subscribers' mirror of the event stream (shared.outside), as many copies as the stream."""

    async def declare(nc: NATS) -> None:
        await ensure_outside_stream(nc, replicas=replicas)

    await with_leader(servers, options, declare, timeout)
