"""Scale-out under faults (docs/operations.md): a three-node JetStream cluster and two processes of every service.

While runs and uploads are in flight, the stream's leader node and one process of every service are
killed with SIGKILL. Afterwards every run has completed with one publication, every upload is active
once, every publication and source is in the catalog once, and every event an outbox committed is on
the stream exactly once and in the inbox of each consumer that follows it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import signal
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import nats
import pytest

from devstack.scale import process_name
from shared.contracts.common import ALL_PROCESSES, SERVICES, STREAM_NAME
from shared.natsauth import workspace_durables
from tests.support import documents
from tests.support.api import FINAL, gateway_client, probe
from tests.support.stack import RunningStack, start_stack, stop_stack

# It runs on a stack of its own, whose processes it kills: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack

RUNS = 6
UPLOADS = 12
PUBLICATIONS = 6
# What a client sees while a gateway or the service behind it is being replaced: try the other gateway.
RETRY_STATUSES = (502, 503, 504)


@pytest.fixture(scope="module")
def cluster_stack(dossier_homes: Callable[[str], Path]) -> Iterator[RunningStack]:
    env = {
        "DOSSIER_NATS_CLUSTER": "3",
        "DOSSIER_REPLICAS": "2",
        # Short leases so the surviving runhost takes over a dead one's runs soon; paced steps so runs
        # are still in flight when the processes die; the killed node stays down while work goes on.
        "DOSSIER_RUN_LEASE_SECONDS": "3",
        "DOSSIER_RUN_STEP_DELAY_SECONDS": "0.2",
        "DOSSIER_NATS_RESTART_DELAY": "15",
    }
    running = start_stack(dossier_homes("scale-home"), timeout=180, extra_env=env)
    try:
        yield running
    finally:
        stop_stack(running.proc)


class Client:
    """An HTTP client of every gateway replica: a request that meets a dying process goes to the other."""

    def __init__(self, stack: RunningStack, scope: str):
        token = stack.token(scope)
        urls = [str(u) for u in stack.state()["gateway_urls"]]  # type: ignore[attr-defined]
        assert len(urls) == 2
        self.clients = [
            gateway_client(base_url=u, headers={"Authorization": f"Bearer {token}"}, timeout=60) for u in urls
        ]
        self._turn = itertools.count()

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        def attempt() -> httpx.Response | None:
            client = self.clients[next(self._turn) % len(self.clients)]
            try:
                r = client.request(method, path, **kwargs)
            except httpx.TransportError:
                return None
            return None if r.status_code in RETRY_STATUSES else r

        return probe(attempt, timeout=120, interval=0.2)  # type: ignore[no-any-return]

    def ok(self, method: str, path: str, **kwargs: Any) -> Any:
        r = self.call(method, path, **kwargs)
        assert r.status_code in (200, 201, 202), f"{method} {path} → {r.status_code} {r.text[:500]}"
        return r.json()


def pid_of(stack: RunningStack, process: str) -> int:
    return int((stack.home / "pids" / f"{process}.pid").read_text())


async def nats_call(stack: RunningStack, process: str, work: Callable[[Any], Any]) -> Any:
    options = stack.nats_options(process) | {"servers": stack.state()["nats_urls"]}
    nc = await nats.connect(**options)
    try:
        return await work(nc.jetstream())
    finally:
        await nc.close()


def stream_leader(stack: RunningStack) -> str:
    async def leader(js: Any) -> str:
        return str((await js.stream_info(STREAM_NAME)).cluster.leader)

    name = asyncio.run(nats_call(stack, "workspace", leader))
    return process_name("nats", int(name.rsplit("-", 1)[1]))


async def outbox_counts(stack: RunningStack) -> dict[str, tuple[int, int]]:
    """Per database: (events committed, events not yet published or parked)."""
    counts = {}
    for name in ALL_PROCESSES:
        conn = await asyncpg.connect(stack.dsn(name))
        try:
            row = await conn.fetchrow(
                "SELECT count(*) AS total, count(*) FILTER (WHERE published_at IS NULL) AS waiting FROM outbox"
            )
            counts[name] = (int(row["total"]), int(row["waiting"]))
        finally:
            await conn.close()
    return counts


async def inbox_counts(stack: RunningStack) -> dict[str, int]:
    conn = await asyncpg.connect(stack.dsn("workspace"))
    try:
        rows = await conn.fetch("SELECT consumer, count(*) AS n FROM inbox GROUP BY consumer")
    finally:
        await conn.close()
    return {r["consumer"]: int(r["n"]) for r in rows}


async def stream_counts(stack: RunningStack) -> tuple[int, dict[str, int], dict[str, tuple[int, int]]]:
    """Messages on the stream, per subject, and per durable (pending, unacknowledged)."""

    async def read(js: Any) -> tuple[int, dict[str, int], dict[str, tuple[int, int]]]:
        info = await js.stream_info(STREAM_NAME, subjects_filter=">")
        consumers = {}
        for durable in workspace_durables():
            ci = await js.consumer_info(STREAM_NAME, durable)
            consumers[durable] = (ci.num_pending, ci.num_ack_pending)
        return info.state.messages, dict(info.state.subjects or {}), consumers

    return await nats_call(stack, "workspace", read)  # type: ignore[no-any-return]


# Start (about a minute on two cores), the work, the restarts, and the settling of every consumer.
@pytest.mark.timeout(480)
def test_kill_a_nats_node_and_one_process_of_every_service_mid_work(
    cluster_stack: RunningStack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    stack = cluster_stack
    state = stack.state()
    assert len(state["nats_urls"]) == 3  # type: ignore[arg-type]
    for process in [*ALL_PROCESSES, *(f"{s}.2" for s in ALL_PROCESSES), "nats", "nats.2", "nats.3"]:
        assert pid_of(stack, process) > 0
    assert set(state["metrics"]) >= {f"{s}.2" for s in ALL_PROCESSES}  # type: ignore[arg-type]

    client = Client(stack, f"s{uuid.uuid4().hex[:10]}")
    ws = client.ok("POST", "/v1/workspaces", json={"title": "Fund X", "goal": "Assess the liquidity of Fund X"})
    for i in range(PUBLICATIONS):
        body = {
            "title": f"Fund X liquidity report {i}",
            "body": f"Finding {i} on Fund X liquidity.",
            "workspace_id": ws["id"],
        }
        client.ok("POST", "/v1/publications", json=body)
    catalog_path = f"/v1/workspaces/{ws['id']}/catalog?limit=200"
    probe(lambda: len(client.ok("GET", catalog_path)["items"]) >= PUBLICATIONS, timeout=60)

    question = "What do the Fund X liquidity reports conclude?"
    run_requests = [uuid.uuid4().hex for _ in range(RUNS)]
    runs = [
        client.ok("POST", f"/v1/workspaces/{ws['id']}/runs", json={"question": question, "request_id": rid})
        for rid in run_requests
    ]

    def upload(i: int) -> dict[str, Any]:
        data = documents.pdf([f"Fund X note {i}: redemptions are met from cash."])
        fields = {"source_id": f"note-{i}", "workspace_id": ws["id"]}
        return dict(client.ok("POST", "/v1/assets", data=fields, files={"file": (f"note-{i}.pdf", data)}))

    with ThreadPoolExecutor(3) as pool:
        uploads = pool.map(upload, range(UPLOADS))
        probe(lambda: any(client.ok("GET", f"/v1/runs/{r['id']}")["status"] == "running" for r in runs), timeout=60)
        leader = stream_leader(stack)
        victims = {leader: pid_of(stack, leader)} | {process: pid_of(stack, process) for process in ALL_PROCESSES}
        for pid in victims.values():
            os.kill(pid, signal.SIGKILL)
        unfinished = [r for r in runs if client.ok("GET", f"/v1/runs/{r['id']}")["status"] not in FINAL]
        assert unfinished, "every run finished before the kill; the test proves nothing"
        uploaded = list(uploads)

    # Every process the kill hit is replaced (NATS after its restart delay), and nothing ran twice.
    probe(lambda: all(pid_of(stack, p) != pid for p, pid in victims.items()), timeout=60)

    finished = [probe(lambda r=r: _final(client, r["id"]), timeout=180) for r in runs]
    again = [
        client.ok("POST", f"/v1/workspaces/{ws['id']}/runs", json={"question": question, "request_id": rid})
        for rid in run_requests
    ]
    assert [r["id"] for r in again] == [r["id"] for r in runs], "a retried start made a second run"
    for run in finished:
        assert run["status"] == "completed", run["error"]
        assert run["publication"] is not None
        ledger = client.ok("GET", f"/v1/runs/{run['id']}/ledger")["items"]
        reads = [(r["ref"]["id"], r["ref"]["version"]) for r in ledger if r["stage"] == "read"]
        assert reads and len(reads) == len(set(reads)), "a source was read twice: two workers ran one run"
        assert client.ok("GET", f"/v1/publications/{run['publication']['id']}")["latest_version"] == 1

    for i, asset in enumerate(uploaded):
        source = client.ok("GET", f"/v1/sources/note-{i}")
        assert [(v["version"], v["status"]) for v in source["versions"]] == [(1, "active")], source
        assert asset["status"] == "active", asset

    expected = {("publication", r["publication"]["id"]) for r in finished} | {
        ("source", f"note-{i}") for i in range(UPLOADS)
    }

    def catalog_complete() -> list[dict[str, Any]] | None:
        items = client.ok("GET", catalog_path)["items"]
        return items if expected <= {(i["kind"], i["id"]) for i in items} else None

    try:
        items = probe(catalog_complete, timeout=120)
    except AssertionError:
        present = {(i["kind"], i["id"]) for i in client.ok("GET", catalog_path)["items"]}
        logs = shutil.copytree(stack.home / "logs", tmp_path_factory.mktemp("scale-logs"), dirs_exist_ok=True)
        raise AssertionError(
            f"missing from the catalog: {sorted(expected - present)}; outboxes {asyncio.run(outbox_counts(stack))},"
            f" stream {asyncio.run(stream_counts(stack))}, inboxes {asyncio.run(inbox_counts(stack))}; logs in {logs}"
        ) from None
    for run in finished:
        published = [i for i in items if i["kind"] == "publication" and i["id"] == run["publication"]["id"]]
        assert len(published) == 1, published
    for i in range(UPLOADS):
        assert len([item for item in items if item["kind"] == "source" and item["id"] == f"note-{i}"]) == 1

    _assert_every_event_once(stack)


def _final(client: Client, run_id: str) -> dict[str, Any] | None:
    run = client.ok("GET", f"/v1/runs/{run_id}")
    return dict(run) if run["status"] in FINAL else None


def _assert_every_event_once(stack: RunningStack) -> None:
    """Each committed outbox row is on the stream once (the stream drops a re-publish of the same id), and
    each event a consumer follows is in its inbox once."""

    def settled() -> tuple[dict[str, tuple[int, int]], tuple[int, dict[str, int], dict[str, tuple[int, int]]]] | None:
        outboxes = asyncio.run(outbox_counts(stack))
        stream = asyncio.run(stream_counts(stack))
        committed = sum(total for total, _ in outboxes.values())
        waiting = sum(w for _, w in outboxes.values())
        idle = all(pending == 0 and unacked == 0 for pending, unacked in stream[2].values())
        return (outboxes, stream) if waiting == 0 and idle and stream[0] >= committed else None

    outboxes, (messages, subjects, _) = probe(settled, timeout=120, interval=0.5)
    committed = sum(total for total, _ in outboxes.values())
    assert messages == committed, f"stream holds {messages} events, the outboxes committed {committed}: {outboxes}"
    inboxes = asyncio.run(inbox_counts(stack))
    for durable, subject in workspace_durables().items():
        assert inboxes.get(durable, 0) == subjects.get(subject, 0), (durable, inboxes, subjects)
    assert set(SERVICES) <= set(outboxes)
    print(json.dumps({"events": messages, "per_subject": subjects, "inboxes": inboxes}))
