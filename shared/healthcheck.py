"""`python -m shared.healthcheck SERVICE`: exit 0 when the service answers on the bus (container healthchecks)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable

import nats

from shared.bus import BusClient
from shared.natsauth import connect_options
from shared.settings import CommonSettings

# A container healthcheck must answer, never hang: a bus that does not answer in time is a failed check.
DEADLINE_SECONDS = 8.0


async def _ping(service: str) -> bool:
    settings = CommonSettings()
    # One try at each server: nats-py otherwise keeps retrying an unreachable server list.
    nc = await nats.connect(
        settings.nats_servers,
        connect_timeout=2,
        allow_reconnect=False,
        max_reconnect_attempts=0,
        **connect_options(settings),
    )
    try:
        return await BusClient(nc).ping(service, timeout=2.0)
    finally:
        await nc.close()


async def _within(ping: Awaitable[bool], seconds: float) -> bool:
    async with asyncio.timeout(seconds):
        return await ping


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m shared.healthcheck SERVICE", file=sys.stderr)
        return 2
    try:
        return 0 if asyncio.run(_within(_ping(sys.argv[1]), DEADLINE_SECONDS)) else 1
    except Exception:
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
