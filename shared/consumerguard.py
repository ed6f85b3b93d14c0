"""The consumer guard: the only way an outside subscriber's consumer comes to exist (shared.outside).

Outside subscribers' consumer-create requests (`$JS.API.CONSUMER.CREATE.DOSSIER_EVENTS.<name>[.<filter>]`,
`$JS.API.CONSUMER.DURABLE.CREATE.DOSSIER_EVENTS.<name>`) arrive here, as `dossier.guard.create.…` and
`dossier.guard.durable.…` in the mirror's account. A request is passed on to the mirror's JetStream API
only if the consumer is named `ext-*` in the subject, the body names no other consumer, and it delivers to
no subject (pull consumers only: a push consumer's deliveries could not leave the mirror's account anyway).
How many there may be is the mirror account's JetStream limit (shared.outside `MAX_CONSUMERS_SETTING`); the
server refuses one past it, and the guard adds to that refusal what to do.
Anything else is answered with JetStream's own error shape (403), so clients raise their usual API error.

`python -m shared.consumerguard` declares the mirror (shared.outside) and then serves, as the `outside`
user (DOSSIER_NATS_URL, DOSSIER_NATS_USER, DOSSIER_NATS_PASSWORD, DOSSIER_STREAM_REPLICAS), until SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from shared.contracts.common import STREAM_NAME
from shared.outside import (
    EVENTS_USER,
    EXTERNAL_CONSUMER_PREFIX,
    GUARD_PREFIX,
    JS_API,
    MAX_CONSUMERS_ERR_CODE,
    MAX_CONSUMERS_SETTING,
    OUTSIDE_ADMIN,
    declare_outside_stream,
)
from shared.subscriptions import subscriptions_live

log = logging.getLogger("dossier.consumerguard")

_NAME = re.compile(r"[A-Za-z0-9_-]{1,200}")
_REFUSED_CODE = 10999
FORWARD_TIMEOUT = 10.0


class Refusal(Exception):
    pass


def forward_subject(subject: str, body: dict[str, Any]) -> str:
    """The mirror's API subject for a guarded request, or Refusal with the reason.

    `subject` is `dossier.guard.create.<name>[.<filter>]` or `dossier.guard.durable.<name>`.
    """
    kind, _, rest = subject.removeprefix(f"{GUARD_PREFIX}.").partition(".")
    name, _, filter_subject = rest.partition(".")
    if not name.startswith(EXTERNAL_CONSUMER_PREFIX) or not _NAME.fullmatch(name):
        raise Refusal(f"only consumers named {EXTERNAL_CONSUMER_PREFIX}* may be created")
    config = body.get("config")
    if not isinstance(config, dict):
        raise Refusal("the request has no consumer config")
    if body.get("stream_name", STREAM_NAME) != STREAM_NAME:
        raise Refusal("the request names another stream")
    for field in ("name", "durable_name"):
        if config.get(field) not in (None, "", name):
            raise Refusal(f"the config's {field} is not the consumer named in the subject")
    if config.get("deliver_subject"):
        raise Refusal("push consumers are not allowed: use a pull consumer")
    if kind == "durable" and not filter_subject:
        return f"{JS_API}.CONSUMER.DURABLE.CREATE.{STREAM_NAME}.{name}"
    if kind == "create":
        return f"{JS_API}.CONSUMER.CREATE.{STREAM_NAME}.{name}" + (f".{filter_subject}" if filter_subject else "")
    raise Refusal("unknown consumer-create form")


def refusal(description: str) -> bytes:
    error = {"code": 403, "err_code": _REFUSED_CODE, "description": description}
    return json.dumps({"type": "io.nats.jetstream.api.v1.consumer_create_response", "error": error}).encode()


def explained(data: bytes) -> bytes:
    """The mirror's answer; a create refused by the cap on outside consumers also says what to do."""
    try:
        answer = json.loads(data)
    except ValueError:
        return data
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict) or error.get("err_code") != MAX_CONSUMERS_ERR_CODE:
        return data
    error["description"] = (
        f"{error.get('description')}: the outside subscribers' consumers on {STREAM_NAME}, all of them together,"
        f" are at their cap ({MAX_CONSUMERS_SETTING}); delete an {EXTERNAL_CONSUMER_PREFIX}* consumer no longer used"
    )
    return json.dumps(answer).encode()


async def handle(nc: NATS, msg: Msg) -> None:
    try:
        body = json.loads(msg.data or b"{}")
        if not isinstance(body, dict):
            raise Refusal("the request is not a JSON object")
        target = forward_subject(msg.subject, body)
    except (Refusal, ValueError) as exc:
        log.warning("refused %s: %s", msg.subject, exc)
        await msg.respond(refusal(str(exc)))
        return
    try:
        reply = await nc.request(target, msg.data, timeout=FORWARD_TIMEOUT)
    except Exception as exc:
        await msg.respond(refusal(f"the mirror did not answer ({type(exc).__name__})"))
        return
    await msg.respond(explained(reply.data))


async def serve(nc: NATS) -> None:
    async def on_request(msg: Msg) -> None:
        await handle(nc, msg)

    # A queue group: any number of guards share the requests.
    await nc.subscribe(f"{GUARD_PREFIX}.>", queue="guard", cb=on_request)
    await subscriptions_live(nc)


async def run(servers: list[str], options: dict[str, Any], replicas: int) -> None:
    await declare_outside_stream(servers, options, replicas, timeout=120)
    nc = await nats.connect(servers, max_reconnect_attempts=-1, **options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await serve(nc)
        await stop.wait()
    finally:
        await nc.drain()


async def guard_answers(servers: list[str], events_password: str) -> bool:
    """A create request of the outside subscribers is answered (a refusal: the probe's name is not ext-)."""
    try:
        nc = await nats.connect(servers, user=EVENTS_USER, password=events_password, max_reconnect_attempts=0)
    except Exception:
        return False
    try:
        await nc.request(f"{JS_API}.CONSUMER.DURABLE.CREATE.{STREAM_NAME}.probe", b"{}", timeout=1)
        return True
    except Exception:
        return False
    finally:
        await nc.close()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    servers = os.environ["DOSSIER_NATS_URL"].split(",")
    options = {
        "user": os.environ.get("DOSSIER_NATS_USER", OUTSIDE_ADMIN),
        "password": os.environ["DOSSIER_NATS_PASSWORD"],
    }
    asyncio.run(run(servers, options, int(os.environ.get("DOSSIER_STREAM_REPLICAS") or 1)))


if __name__ == "__main__":
    main()
