"""Exact-version publication read through the gateway vs a raw nats-py request/reply, in the same run.

Starts its own stack in a temporary DOSSIER_HOME, measures, prints the ratios, and stops the stack.
Run with `make bench` (or `.venv/bin/python bench/bus.py`). Never part of the test run.
"""

from __future__ import annotations

import asyncio
import http.client
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import nats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stats import BENCH_BODY, goal, publish, report
from shared.bus import BusClient
from shared.contracts import publication as c
from shared.contracts.common import Actor
from shared.proof import ProofSigner, load_private_key
from tests.support.stack import start_stack, stop_stack

WARMUP = 200
N = 3000


# A subject the publication user may both answer and call (its own), so the floor runs on real credentials.
ECHO = "dossier.publication.bench_echo"


async def measure_raw(options: dict[str, Any]) -> list[float]:
    """The floor: one nats-py request to an in-process echo responder on the same server."""
    nc = await nats.connect(**options)
    try:

        async def echo(msg: nats.aio.msg.Msg) -> None:
            await msg.respond(msg.data)

        # In the publication queue group: the only way its user may take requests (shared/natsauth.py).
        await nc.subscribe(ECHO, queue="publication", cb=echo)
        body = b'{"id":"pub_x","version":1}'
        samples = []
        for i in range(WARMUP + N):
            t = time.perf_counter()
            await nc.request(ECHO, body, timeout=5)
            if i >= WARMUP:
                samples.append((time.perf_counter() - t) * 1000)
        return samples
    finally:
        await nc.close()


async def measure_bus(options: dict[str, Any], gateway_key: str, scope: str, pub_id: str) -> list[float]:
    """The publication service on the bus, without HTTP: envelope, proof of caller (signed here as the gateway
    signs, verified there), validation, scoped SQL read, hash check."""
    nc = await nats.connect(**options)
    try:
        bus = BusClient(nc, signer=ProofSigner("gateway", load_private_key(gateway_key)))
        actor = Actor(scope=scope, principal="bench")
        samples = []
        for i in range(WARMUP + N):
            t = time.perf_counter()
            await bus.call_raw(c.READ, {"id": pub_id, "version": 1}, actor=actor)
            if i >= WARMUP:
                samples.append((time.perf_counter() - t) * 1000)
        return samples
    finally:
        await nc.close()


def measure_gateway(url: str, token: str, pub_id: str) -> list[float]:
    samples = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
        for i in range(WARMUP + N):
            t = time.perf_counter()
            r = client.get(f"/v1/publications/{pub_id}/versions/1")
            elapsed = (time.perf_counter() - t) * 1000
            r.raise_for_status()
            if i >= WARMUP:
                samples.append(elapsed)
    return samples


def measure_gateway_stdlib(url: str, token: str, pub_id: str) -> list[float]:
    """The same GET on one kept-alive `http.client` connection: httpx spends about half a millisecond of
    its own on each request, which is the client's cost, not the gateway's."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
    headers = {"Authorization": f"Bearer {token}"}
    samples = []
    try:
        for i in range(WARMUP + N):
            t = time.perf_counter()
            conn.request("GET", f"/v1/publications/{pub_id}/versions/1", headers=headers)
            response = conn.getresponse()
            response.read()
            elapsed = (time.perf_counter() - t) * 1000
            if response.status != 200:
                raise RuntimeError(f"the gateway answered {response.status}")
            if i >= WARMUP:
                samples.append(elapsed)
    finally:
        conn.close()
    return samples


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dossier-bench-") as tmp:
        stack = start_stack(Path(tmp) / "home")
        try:
            scope = "bench"
            token = stack.token(scope)
            pub = publish(stack.url, token)
            print(f"exact-version read of a {len(BENCH_BODY)}-char publication, {N} sequential requests each\n")
            raw_med, raw_p99 = report(
                "raw nats-py request/reply (echo)", asyncio.run(measure_raw(stack.nats_options("publication")))
            )
            bus_med, bus_p99 = report(
                "publication.read over the bus",
                asyncio.run(measure_bus(stack.nats_options("gateway"), stack.proof_key("gateway"), scope, pub["id"])),
            )
            httpx_med, httpx_p99 = report(
                "GET /v1/publications/{id}/versions/1 (httpx)", measure_gateway(stack.url, token, pub["id"])
            )
            gw_med, gw_p99 = report(
                "GET /v1/publications/{id}/versions/1 (http.client)",
                measure_gateway_stdlib(stack.url, token, pub["id"]),
            )
            print()
            print(f"ratio bus/raw      median {bus_med / raw_med:6.2f}x   p99 {bus_p99 / raw_p99:6.2f}x")
            print(f"ratio gateway/raw  median {httpx_med / raw_med:6.2f}x   p99 {httpx_p99 / raw_p99:6.2f}x   (httpx)")
            print(f"ratio gateway/raw  median {gw_med / raw_med:6.2f}x   p99 {gw_p99 / raw_p99:6.2f}x   (http.client)")
            goal("gateway exact read p50 (http.client) ÷ raw nats-py p50", gw_med / raw_med, 4, at_most=True)
            goal("bus read p50 ÷ raw nats-py p50", bus_med / raw_med, 2.5, at_most=True)
        finally:
            stop_stack(stack.proc)


if __name__ == "__main__":
    main()
