"""An outside subscriber keeps the bus across a restart of the stack on its home: the NATS client ports are
chosen once and kept in the home (devstack/natsports.py), so `nats/events.json` stays valid and a subscriber
that reconnects finds the server again without reading it anew; a kept port another process holds stops the
start with a message naming it."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest

from shared.contracts import workspace as w
from shared.contracts.common import Event
from tests.support.api import Api
from tests.support.probe import probe_until
from tests.support.stack import start_stack, stop_stack


async def test_an_outside_subscriber_gets_events_after_a_restart_without_rereading_events_json(
    dossier_homes: Callable[[str], Path],
) -> None:
    home = dossier_homes("events-restart")
    stack = await asyncio.to_thread(start_stack, home)
    described = (home / "nats" / "events.json").read_text()
    seen: list[Event] = []
    reconnects: list[int] = []

    async def record(msg: Any) -> None:
        seen.append(Event.model_validate_json(msg.data))

    async def reconnected() -> None:
        reconnects.append(1)

    # What an outside subscriber does: read events.json once, connect, reconnect for ever.
    nc = await nats.connect(
        **stack.events_options(), max_reconnect_attempts=-1, reconnect_time_wait=0.2, reconnected_cb=reconnected
    )
    try:
        await nc.subscribe("dossier.evt.workspace.>", cb=record)
        await nc.flush()
        stop_stack(stack.proc)
        stack = await asyncio.to_thread(start_stack, home)
        assert (home / "nats" / "events.json").read_text() == described
        servers = json.loads(described)["servers"]
        assert servers == [stack.state()["nats_url"]]

        async def back() -> bool:
            return bool(reconnects) and nc.is_connected

        await probe_until(back, timeout=60)
        api = Api(stack)
        ws = await asyncio.to_thread(api.workspace)

        async def created() -> Event | None:
            return next((e for e in seen if e.type == w.EVT_CREATED and e.data.get("workspace_id") == ws["id"]), None)

        event = await probe_until(created, timeout=60)
        assert event.scope == api.scope
    finally:
        await nc.close()
        stop_stack(stack.proc)
    held_port_stops_the_start(home, int(servers[0].rsplit(":", 1)[1]))


def held_port_stops_the_start(home: Path, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        # The subscriber's closed connection may linger in TIME_WAIT on the port: bind past it, as servers do.
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with pytest.raises(RuntimeError, match=rf"NATS client ports already in use: node 1 {port}"):
            start_stack(home)
