"""Catalog latency for a workspace with 100 associations against one with 20,000 (`--large N`; `make
bench-growth` runs 1,000,000), in the same run.

The catalog is bounded (newest N, one index-ordered page, `omitted` from a counter), so the two should
cost about the same. Starts its own stack in a temporary DOSSIER_HOME, fills the two workspaces
(associations are inserted straight into the workspace database; their newest 50 are real
publications in both, so each catalog asks the publication service about the same 50 items), measures
through the gateway and at the database, prints the ratios, and stops the stack.

The goal: the median through the gateway at the large size ÷ at 100 is at most 1.1 (the catalog does not
grow with the workspace). Run with `make bench` (or `python bench/catalog.py` from the repository root).
Never part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stats import goal, report
from services.workspace.repository import WorkspaceRepository
from tests.support.stack import start_stack, stop_stack

SMALL, LARGE = 100, 20_000
REAL_NEWEST = 50  # the default catalog limit: every measured page is 50 real publications
# The workspace repository's own page query, to time the database part alone.
REPO = WorkspaceRepository()
WARMUP = 20
ROUNDS = 200


async def fill(dsn: str, workspace_id: str, total: int, publication_ids: list[str]) -> None:
    """`total` catalog associations: old synthetic ones first, then the real publications, newest."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO associations (workspace_id, kind, ref_id, version, title)"
                " SELECT $1, (ARRAY['publication','source','artifact'])[1 + i % 3], 'old_' || i, 1, 'old ' || i"
                " FROM generate_series(1, $2) AS i",
                workspace_id,
                total - len(publication_ids),
            )
            for pub_id in publication_ids:
                await conn.execute(
                    "INSERT INTO associations (workspace_id, kind, ref_id, version, title)"
                    " VALUES ($1, 'publication', $2, 1, 'real')",
                    workspace_id,
                    pub_id,
                )
            await conn.execute("UPDATE workspaces SET catalog_count = $2 WHERE id = $1", workspace_id, total)
        await conn.execute("ANALYZE associations")
    finally:
        await conn.close()


async def time_queries(dsn: str, scope: str, workspaces: dict[int, str]) -> dict[int, list[float]]:
    conn = await asyncpg.connect(dsn)
    samples: dict[int, list[float]] = {n: [] for n in workspaces}
    try:
        for i in range(WARMUP + ROUNDS):
            for n, wid in workspaces.items():
                started = time.perf_counter()
                await REPO.catalog_page(conn, scope=scope, workspace_id=wid, limit=REAL_NEWEST)
                if i >= WARMUP:
                    samples[n].append((time.perf_counter() - started) * 1000)
    finally:
        await conn.close()
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--large", type=int, default=LARGE, help="associations of the large workspace")
    large_size = parser.parse_args().large
    with tempfile.TemporaryDirectory(prefix="dossier-bench-catalog-") as home:
        stack = start_stack(Path(home) / "home")
        try:
            scope = "bench-catalog"
            auth = {"Authorization": f"Bearer {stack.token(scope)}"}
            with httpx.Client(base_url=stack.url, headers=auth, timeout=60) as api:
                pubs = [
                    api.post("/v1/publications", json={"title": f"Report {i}", "body": f"body {i}"}).json()["id"]
                    for i in range(REAL_NEWEST)
                ]
                workspaces = {
                    n: api.post("/v1/workspaces", json={"title": f"{n} associations", "goal": "bench"}).json()["id"]
                    for n in (SMALL, large_size)
                }
                dsn = stack.dsn("workspace")
                for n, wid in workspaces.items():
                    asyncio.run(fill(dsn, wid, n, pubs))

                samples: dict[int, list[float]] = {n: [] for n in workspaces}
                for i in range(WARMUP + ROUNDS):
                    # Interleaved, so both sizes see the same machine load.
                    for n, wid in workspaces.items():
                        started = time.perf_counter()
                        page = api.get(f"/v1/workspaces/{wid}/catalog").json()
                        elapsed = (time.perf_counter() - started) * 1000
                        if i == 0:
                            assert len(page["items"]) == REAL_NEWEST and page["omitted"] == n - REAL_NEWEST, page
                            assert all(item["available"] for item in page["items"]), page["items"][:2]
                        if i >= WARMUP:
                            samples[n].append(elapsed)
            print(f"catalog through the gateway (limit {REAL_NEWEST}, one publication.check batch per request)")
            small = report(f"  workspace with {SMALL:>9,} associations", samples[SMALL])[0]
            large = report(f"  workspace with {large_size:>9,} associations", samples[large_size])[0]
            print(f"  ratio {large_size:,} / {SMALL:,} (median): {large / small:.2f}")

            db = asyncio.run(time_queries(dsn, scope, workspaces))
            print("the page query alone, at the database")
            small_db = report(f"  workspace with {SMALL:>9,} associations", db[SMALL])[0]
            large_db = report(f"  workspace with {large_size:>9,} associations", db[large_size])[0]
            print(f"  ratio {large_size:,} / {SMALL:,} (median): {large_db / small_db:.2f}")
            goal(f"catalog p50 at {large_size:,} ÷ at {SMALL} associations", large / small, 1.1, at_most=True)
        finally:
            stop_stack(stack.proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
