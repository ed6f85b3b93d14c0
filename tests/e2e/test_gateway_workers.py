"""Two gateway workers on one port (`DOSSIER_GATEWAY_WORKERS=2`), through real processes: both serve, the
port's /metrics counts the requests of both, MCP calls work whichever worker each lands on, and a killed
worker leaves the port serving while the supervisor starts it again."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.contracts import mcp as contract
from tests.e2e.test_mcp import bearer, mcp_client, ok
from tests.support.api import Api, probe
from tests.support.logs import lines_with
from tests.support.stack import RunningStack, start_stack, stop_stack

WORKERS = ("gateway", "gateway-w2")
ROUTE = "/v1/workspaces"


@pytest.fixture(scope="module")
def two_workers(dossier_homes: Callable[[str], Path]) -> Iterator[RunningStack]:
    stack = start_stack(dossier_homes("gateway-workers"), extra_env={"DOSSIER_GATEWAY_WORKERS": "2"})
    try:
        yield stack
    finally:
        stop_stack(stack.proc)  # type: ignore[arg-type]


def metric(stack: RunningStack, family: str, **labels: str) -> float:
    """The sum of `family`'s samples with these labels, as the port's /metrics gives them."""
    r = httpx.get(f"{stack.url}/metrics", headers={"Authorization": f"Bearer {stack.admin_token}"})
    assert r.status_code == 200, r.text
    return sum(
        sample.value
        for found in text_string_to_metric_families(r.text)
        for sample in found.samples
        if sample.name == family and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def list_workspaces(stack: RunningStack, token: str, request_id: str, count: int) -> None:
    """`count` requests, each on a connection of its own, so the kernel spreads them over the workers."""
    for _ in range(count):
        r = httpx.get(
            f"{stack.url}{ROUTE}",
            headers={"Authorization": f"Bearer {token}", "X-Request-ID": request_id, "Connection": "close"},
        )
        assert r.status_code == 200, r.text


def served_by(stack: RunningStack, request_id: str) -> set[str]:
    """The workers whose lines (all in `gateway.log`, each naming its process) show this request id."""
    return {str(line.get("process")) for line in lines_with(stack, "gateway", request_id)}


def test_both_workers_serve_the_port_and_its_metrics_count_both(two_workers: RunningStack) -> None:
    stack = two_workers
    pids = {worker: stack.pid(worker) for worker in WORKERS}
    assert len(set(pids.values())) == 2
    assert stack.state()["gateway_workers"] == 2
    token = stack.token("workers")
    before = metric(stack, "dossier_http_requests_total", method="GET", route=ROUTE)
    request_id = f"req_workers_{uuid.uuid4().hex}"
    list_workspaces(stack, token, request_id, 40)
    # Each worker logs the requests it answered: both answered some.
    assert served_by(stack, request_id) == set(WORKERS)
    # Whichever worker answers the scrape, it counts the requests of both.
    assert metric(stack, "dossier_http_requests_total", method="GET", route=ROUTE) == before + 40
    assert metric(stack, "dossier_gateway_workers") == 2


async def test_mcp_calls_work_whichever_worker_each_lands_on(two_workers: RunningStack) -> None:
    stack = two_workers
    token = stack.token("workers-mcp")
    request_id = f"req_mcp_{uuid.uuid4().hex}"
    # A connection per request: the handshake, the listing and the calls land on either worker.
    headers = bearer(token, Connection="close", **{"X-Request-ID": request_id})
    async with mcp_client(f"{stack.url}/mcp", headers, mode="legacy") as client:
        for n in range(12):
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {t.name for t in contract.TOOLS}
            assert ok(await client.call_tool("list_workspaces", {}))["items"] == [], n
    assert served_by(stack, request_id) == set(WORKERS)


async def test_a_sessions_run_is_held_whichever_worker_each_call_lands_on(two_workers: RunningStack) -> None:
    stack = two_workers
    api = Api(stack)
    ws = api.workspace()
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    request_id = f"req_bound_{uuid.uuid4().hex}"
    headers = bearer(token, Connection="close", **{"X-Request-ID": request_id})
    async with mcp_client(f"{stack.url}/mcp", headers, mode="legacy") as client:
        begin = {"workspace_id": ws["id"], "question": "Anything?", "request_id": uuid.uuid4().hex}
        run = ok(await client.call_tool("begin_run", begin))
        assert run["lease"] is None
        # Bound on one worker, the run is held on the other too: the binding is in the gateway's database.
        for n in range(8):
            assert ok(await client.call_tool("run_catalog", {}))["items"] == [], n
            ok(await client.call_tool("write_run_file", {"path": f"notes/n{n}.md", "text": f"note {n}"}))
        done = ok(await client.call_tool("finish_run", {"answer": "Nothing in the workspace bears on it."}))
    assert done["id"] == run["id"] and done["status"] == "completed"
    assert served_by(stack, request_id) == set(WORKERS)


def test_a_killed_worker_leaves_the_port_serving_and_is_started_again(two_workers: RunningStack) -> None:
    stack = two_workers
    token = stack.token("workers-kill")
    served = metric(stack, "dossier_http_requests_total", method="GET", route=ROUTE)
    killed = stack.pid("gateway-w2")
    os.kill(killed, signal.SIGKILL)
    probe(lambda: not Path(f"/proc/{killed}").exists() or stack.pid("gateway-w2") != killed)
    # The other worker's socket takes every new connection meanwhile: nothing is refused.
    list_workspaces(stack, token, f"req_kill_{uuid.uuid4().hex}", 20)
    restarted = probe(lambda: stack.pid("gateway-w2") != killed and stack.pid("gateway-w2"))
    assert Path(f"/proc/{restarted}").exists()
    # The new worker joins the port and serves; the dead one's gauge is gone, its counts stay in the sums.
    request_id = f"req_again_{uuid.uuid4().hex}"

    def both_serve() -> bool:
        list_workspaces(stack, token, request_id, 10)
        return served_by(stack, request_id) == set(WORKERS)

    probe(both_serve, timeout=60)
    assert metric(stack, "dossier_gateway_workers") == 2
    assert metric(stack, "dossier_http_requests_total", method="GET", route=ROUTE) >= served + 20
    assert "gateway-w2 exited" in stack.output.read_text()  # type: ignore[union-attr]
