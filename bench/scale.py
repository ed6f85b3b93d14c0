"""Throughput with replicas and with a NATS cluster: exact reads per second and extractive runs per
minute, for 1 vs 2 processes of every service and 1 vs 3 NATS nodes, in one run, as ratios.

Starts one stack per shape in a temporary folder (1 node × 1 replica, 1 × 2, 3 × 1, 3 × 2), seeds the
same workspace, drives the reads through every gateway replica with a fixed number of concurrent
clients, submits the same runs, prints the figures and the ratios, and stops each stack. On a machine
with two cores a second process of every service adds no CPU, so the ratios show the cost of the extra
processes and of replicated writes, not the gain they would bring on more cores. Never part of the tests.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.api import Api
from tests.support.stack import RunningStack, start_stack, stop_stack

SHAPES = ((1, 1), (1, 2), (3, 1), (3, 2))  # (NATS nodes, processes per service)
PUBLICATIONS = 10
READ_CLIENTS = 32
READ_SECONDS = 8.0
RUNS = 12
QUESTION = "What do the Fund X liquidity reports conclude about redemptions?"


async def reads_per_second(urls: list[str], token: str, paths: list[str]) -> float:
    """Closed loop: READ_CLIENTS clients, each sending its next exact read as soon as one is answered."""
    clients = [httpx.AsyncClient(base_url=u, headers={"Authorization": f"Bearer {token}"}, timeout=30) for u in urls]
    turn = itertools.count()
    done = 0
    deadline = time.perf_counter() + READ_SECONDS

    async def client_loop() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            i = next(turn)
            r = await clients[i % len(clients)].get(paths[i % len(paths)])
            assert r.status_code == 200, r.text
            done += 1

    started = time.perf_counter()
    try:
        await asyncio.gather(*(client_loop() for _ in range(READ_CLIENTS)))
    finally:
        for c in clients:
            await c.aclose()
    return done / (time.perf_counter() - started)


def measure(stack: RunningStack) -> tuple[float, float]:
    api = Api(stack)
    ws = api.workspace()
    pubs = [
        api.publish(f"Fund X liquidity report {i}", f"Report {i}: Fund X redemption finding {i}. " * 20, ws["id"])
        for i in range(PUBLICATIONS)
    ]
    api.wait_catalog(ws["id"], PUBLICATIONS)
    paths = [f"/v1/publications/{p['id']}/versions/{p['version']}" for p in pubs]
    urls = [str(u) for u in stack.state()["gateway_urls"]]  # type: ignore[attr-defined]
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    rps = asyncio.run(reads_per_second(urls, token, paths))
    started = time.perf_counter()
    ids = [api.start_run(ws["id"], QUESTION)["id"] for _ in range(RUNS)]
    finished = [api.wait_run(i, timeout=600) for i in ids]
    elapsed = time.perf_counter() - started
    assert all(r["status"] == "completed" for r in finished), [r["error"] for r in finished]
    return rps, RUNS / elapsed * 60


def main() -> None:
    results: dict[tuple[int, int], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="dossier-bench-scale-") as tmp:
        for nodes, replicas in SHAPES:
            env = {"DOSSIER_NATS_CLUSTER": str(nodes), "DOSSIER_REPLICAS": str(replicas)}
            stack = start_stack(Path(tmp) / f"n{nodes}r{replicas}", timeout=180, extra_env=env)
            try:
                results[(nodes, replicas)] = measure(stack)
            finally:
                stop_stack(stack.proc)
    print(f"{os.cpu_count()} CPUs; {READ_CLIENTS} concurrent readers for {READ_SECONDS:.0f} s, {RUNS} runs at once")
    for (nodes, replicas), (rps, rpm) in results.items():
        print(f"  {nodes} NATS node(s), {replicas} process(es)/service: {rps:8.1f} exact reads/s {rpm:7.1f} runs/min")
    base_rps, base_rpm = results[(1, 1)]
    for label, shape in (("2 replicas / 1", (1, 2)), ("3 nodes / 1", (3, 1)), ("3 nodes + 2 replicas / 1", (3, 2))):
        rps, rpm = results[shape]
        print(f"  ratio {label:<26} reads {rps / base_rps:5.2f}x   runs {rpm / base_rpm:5.2f}x")


if __name__ == "__main__":
    main()
