"""When a connection's subscriptions are live at the server: a module of its own, so that a process that only
subscribes (the consumer guard, shared/consumerguard.py) need not import the bus's request machinery."""

from __future__ import annotations

from nats.aio.client import Client as NATS


async def subscriptions_live(nc: NATS) -> None:
    """Return once the server has every subscription this connection made so far.

    One `nc.flush()` is not enough: nats-py writes the flush's PING straight to the socket, while SUB
    commands wait in the client's pending buffer for its flusher task, so the PONG can come back before the
    server has read the SUBs, and a request sent then from another connection finds no responder. The first
    flush wakes the flusher, which writes the pending SUBs before that PONG can be read; the second PING is
    written after them, so its PONG means the server has them (tests/service/test_subscriptions_live.py).
    """
    await nc.flush()
    await nc.flush()
