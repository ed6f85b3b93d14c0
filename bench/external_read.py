"""The latency of one run read of an external run over the Python client, over MCP (the official `mcp`
SDK's client, one connected session) and over raw HTTP, on the same run with the same lease, interleaved
call by call so that any drift of the machine falls on all three alike; a plain publication GET beside
them, and an MCP session's connect.

Every read after the first is answered from the run's own copy (the same ref and locator is never read
twice), so the three differ only in the way there: the client's session (httpx, a typed model back), the
MCP server's tool call (JSON-RPC over streamable HTTP, then the same bus call) and the bare route.

Starts its own stack in a temporary folder (with a step limit above the calls it makes: every run-bound
call is a step), prints, and stops it. Never part of the test run.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))

import httpx
import httpx2
from dossier_client import Dossier
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench._stats import report
from tests.support.api import Api
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.stack import start_stack, stop_stack

CALLS = 200
WARMUP = 10
CONNECTS = 20


def ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


async def measure(url: str, token: str, workspace_id: str) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"client": [], "mcp": [], "http": [], "publication GET": [], "mcp connect": []}
    headers = {"Authorization": f"Bearer {token}"}
    with Dossier(url, token) as dossier, dossier.external_run(workspace_id, "What changed for Fund X?") as run:
        hit = run.search("redemption gates")[0]
        body = {"ref": {"kind": "evidence", "id": hit.evidence_id}}
        lease = run.lease.token
        publication = dossier.publish("bench", "Fund X can meet 30-day redemptions. " * 100)
        http = httpx.Client(base_url=url, headers=headers | {"X-Run-Lease": lease}, timeout=30)
        async with httpx2.AsyncClient(headers=headers, timeout=30) as mcp_http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=mcp_http)) as mcp:
                arguments = {"run_id": run.run_id, "lease": lease} | body

                async def over_mcp() -> Any:
                    result = await mcp.call_tool("run_read", arguments)
                    assert not result.is_error, result.structured_content
                    return result.structured_content

                def over_http() -> Any:
                    r = http.post(f"/v1/runs/{run.run_id}/read", json=body)
                    r.raise_for_status()
                    return r.json()

                def publication_get() -> Any:
                    r = http.get(f"/v1/publications/{publication.id}/versions/1")
                    r.raise_for_status()

                first = run.read(hit)
                assert (await over_mcp())["text"] == over_http()["text"] == first.text
                for i in range(WARMUP + CALLS):
                    timed = i >= WARMUP
                    t = time.perf_counter()
                    run.read(hit)
                    timed and samples["client"].append(ms(t))
                    t = time.perf_counter()
                    await over_mcp()
                    timed and samples["mcp"].append(ms(t))
                    t = time.perf_counter()
                    over_http()
                    timed and samples["http"].append(ms(t))
                    t = time.perf_counter()
                    publication_get()
                    timed and samples["publication GET"].append(ms(t))
        for _ in range(CONNECTS):
            async with httpx2.AsyncClient(headers=headers, timeout=30) as mcp_http:
                t = time.perf_counter()
                async with Client(streamable_http_client(f"{url}/mcp", http_client=mcp_http)):
                    samples["mcp connect"].append(ms(t))
        http.close()  # noqa: ASYNC212 - after the measured calls, nothing else waits on the loop
        reads = sum(1 for row in dossier.ledger(run.run_id) if row.stage == "read")
        assert reads == 1, f"the same passage read {reads} times"
        dossier.cancel_run(run.run_id)
    return samples


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="dossier-bench-external-read-") as tmp:
        stack = start_stack(Path(tmp) / "home", extra_env={"DOSSIER_RUN_MAX_STEPS": str(10 * (WARMUP + CALLS))})
        try:
            api = Api(stack)
            ws = api.workspace()
            assert api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])["status"] == "active"
            api.wait_catalog(ws["id"], 1)
            token = api.http.headers["Authorization"].removeprefix("Bearer ")
            samples = asyncio.run(measure(stack.url, token, ws["id"]))
        finally:
            stop_stack(stack.proc)
    print(f"one run read of an external run (same run, same lease, {CALLS} calls each, interleaved):")
    for name, values in samples.items():
        report(name, values)


if __name__ == "__main__":
    main()
