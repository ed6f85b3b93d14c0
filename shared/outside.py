"""Outside subscribers: a NATS account of their own, holding a mirror of the event stream.

The services and their durable consumers live in the internal account (`DOSSIER`). Subscribers outside
the system connect as the `events` user of the `OUTSIDE` account, and a JetStream API request there
reaches only that account's JetStream: its own `DOSSIER_EVENTS`, a read-only mirror of the internal
stream, and the consumers made on it. No subject form of the API (the nameless `CONSUMER.CREATE`
carrying a name in its body, a push consumer's `deliver_subject`, a reply to an inbox) can name an
internal consumer or deliver into an internal subject: those live in another account.

What the internal account shares, and with `OUTSIDE` only:
- the events as they are published (`dossier.evt.>`), for plain subscriptions;
- the one JetStream API subject the mirror uses to make its consumer (`$JS.API.CONSUMER.CREATE.
  DOSSIER_EVENTS`, imported under `$JS.dossier.API`, which no outside user may publish to), flow
  control replies, and the mirror's delivery subjects.

In the outside account the `events` user may make consumers only by the subject forms that carry the
name (NATS permissions match whole tokens, so the nameless form, whose name is in the body, is not
allowed at all), use them, and delete them; the `outside` user (the stack's, never handed out) only
declares the mirror.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
from nats.js import api

from shared.contracts.common import EVENT_SUBJECT_PREFIX, STREAM_NAME
from shared.secretfiles import write_secret

INTERNAL_ACCOUNT = "DOSSIER"
OUTSIDE_ACCOUNT = "OUTSIDE"
EVENTS_USER = "events"
# Declares the outside mirror at start; its password never leaves $DOSSIER_HOME.
OUTSIDE_ADMIN = "outside"
EXTERNAL_CONSUMER_PREFIX = "ext-"
JS_API = "$JS.API"
# The internal account's JetStream API as the outside account sees it (only the mirror uses it).
INTERNAL_API = "$JS.dossier.API"
MIRROR_DELIVERY = "dossier.outside.mirror"
_MIRROR_CREATE_FORMS = (f"CONSUMER.CREATE.{STREAM_NAME}", f"CONSUMER.CREATE.{STREAM_NAME}.>")


def internal_exports() -> list[dict[str, Any]]:
    only = [OUTSIDE_ACCOUNT]
    return [
        {"stream": f"{EVENT_SUBJECT_PREFIX}.>", "accounts": only},
        # 2.15 makes the mirror's consumer by the nameless form; other releases name it in the subject.
        *({"service": f"{JS_API}.{subject}", "accounts": only} for subject in _MIRROR_CREATE_FORMS),
        {"service": "$JS.FC.>", "accounts": only},
        {"stream": f"{MIRROR_DELIVERY}.>", "accounts": only},
    ]


def outside_imports() -> list[dict[str, Any]]:
    source = INTERNAL_ACCOUNT
    return [
        {"stream": {"account": source, "subject": f"{EVENT_SUBJECT_PREFIX}.>"}},
        *(
            {"service": {"account": source, "subject": f"{JS_API}.{subject}"}, "to": f"{INTERNAL_API}.{subject}"}
            for subject in _MIRROR_CREATE_FORMS
        ),
        {"service": {"account": source, "subject": "$JS.FC.>"}},
        {"stream": {"account": source, "subject": f"{MIRROR_DELIVERY}.>"}},
    ]


def events_permissions() -> dict[str, Any]:
    """Read events; make, use and delete consumers on the outside mirror; nothing else.

    `CONSUMER.CREATE.<stream>.*` (and `.*.>`, with a filter) matches only subjects naming the consumer,
    never the nameless `CONSUMER.CREATE.<stream>`. There is no `allow_responses`: nothing this user
    receives asks for a reply it may give, so it cannot answer anyone's request either.
    """
    stream = STREAM_NAME
    api_subjects = [
        f"{JS_API}.INFO",
        f"{JS_API}.STREAM.NAMES",
        f"{JS_API}.STREAM.INFO.{stream}",
        f"{JS_API}.CONSUMER.CREATE.{stream}.*",
        f"{JS_API}.CONSUMER.CREATE.{stream}.*.>",
        f"{JS_API}.CONSUMER.DURABLE.CREATE.{stream}.*",
        f"{JS_API}.CONSUMER.INFO.{stream}.*",
        f"{JS_API}.CONSUMER.NAMES.{stream}",
        f"{JS_API}.CONSUMER.LIST.{stream}",
        f"{JS_API}.CONSUMER.MSG.NEXT.{stream}.*",
        f"{JS_API}.CONSUMER.DELETE.{stream}.*",
        f"$JS.ACK.{stream}.*.>",
    ]
    return {
        "publish": {"allow": api_subjects},
        "subscribe": {"allow": [f"{EVENT_SUBJECT_PREFIX}.>", "_INBOX.>"]},
    }


def admin_permissions() -> dict[str, Any]:
    stream = STREAM_NAME
    return {
        "publish": {"allow": [f"{JS_API}.INFO", f"{JS_API}.STREAM.INFO.{stream}", f"{JS_API}.STREAM.CREATE.{stream}"]},
        "subscribe": {"allow": ["_INBOX.>"]},
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


async def ensure_outside_stream(nc: nats.NATS, *, replicas: int = 1) -> None:
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
    """`$DOSSIER_HOME/nats/events.json`: how an outside subscriber connects (CONTRACT "The local stack")."""
    path = home / "nats" / "events.json"
    write_secret(path, json.dumps({"servers": servers, "user": EVENTS_USER, "password": password}, indent=2) + "\n")
    return path


def main() -> None:
    """`python -m shared.outside`: declare the mirror in a deployment (compose's and Kubernetes' one-shot),
    as the `outside` user given by DOSSIER_NATS_URL / DOSSIER_NATS_USER / DOSSIER_NATS_PASSWORD."""
    import asyncio
    import os

    from shared.scale import declare_outside_stream

    servers = os.environ["DOSSIER_NATS_URL"].split(",")
    options = {
        "user": os.environ.get("DOSSIER_NATS_USER", OUTSIDE_ADMIN),
        "password": os.environ["DOSSIER_NATS_PASSWORD"],
    }
    replicas = int(os.environ.get("DOSSIER_STREAM_REPLICAS") or 1)
    asyncio.run(declare_outside_stream(servers, options, replicas, timeout=120))


if __name__ == "__main__":
    main()
