"""Catalog latency for a workspace with 100 associations against one with 20,000 (`--large N`; `make
bench-growth` runs 1,000,000), in the same run.

The catalog is one order in parts (services/workspace/catalog.py: the analyst's own material, then the runs'
current publications, then the superseded ones), read as of a mark, each part an index-ordered scan that
stops at the page, with `omitted` from counters, so the two should cost about the same, on the first page
and on a later one. Starts its own stack in a temporary DOSSIER_HOME, fills the two workspaces
(associations are inserted straight into the workspace database, as a workspace run daily would hold them:
old run publications, half of them superseded, with their runs' reports, and the analyst's 50 newest
publications, real ones in both, so each first page asks the publication service about the same 50 items),
measures the first and the second page through the gateway and at the database, prints the ratios, and
stops the stack.

The goal: the median first page through the gateway at the large size ÷ at 100 is at most 1.1 (the catalog
does not grow with the workspace). Run with `make bench` (or `python bench/catalog.py` from the repository
root). Never part of the tests.
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
from services.workspace.catalog import CatalogReader, Position
from services.workspace.repository import WorkspaceRepository
from shared.settings import WorkspaceSettings
from tests.support.stack import start_stack, stop_stack

SMALL, LARGE = 100, 20_000
REAL_NEWEST = 50  # the default catalog limit: every measured page is 50 real publications
# The workspace repository's own page query, to time the database part alone.
REPO = WorkspaceRepository()
# Its page reading alone (no owner is asked at the database level).
READER = CatalogReader(None, WorkspaceSettings.model_construct(catalog_default_limit=REAL_NEWEST))  # type: ignore[arg-type]
WARMUP = 20
ROUNDS = 200


async def fill(dsn: str, workspace_id: str, total: int, publication_ids: list[str]) -> int:
    """`total` associations: old runs' publications and reports first (every fourth publication superseded by
    a later run), then the analyst's real publications, newest; returns how many are catalog items."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO associations (workspace_id, kind, ref_id, version, run_id, title)"
                " SELECT $1, (ARRAY['publication','artifact'])[1 + i % 2], 'old_' || i, 1, 'run_' || (i / 2),"
                " 'old ' || (i / 2) FROM generate_series(1, $2) AS i",
                workspace_id,
                total - len(publication_ids),
            )
            await conn.execute(
                "UPDATE associations SET superseded_seq = seq + 4 WHERE workspace_id = $1 AND catalog_class = 1"
                " AND seq % 4 = 0",
                workspace_id,
            )
            for pub_id in publication_ids:
                await conn.execute(
                    "INSERT INTO associations (workspace_id, kind, ref_id, version, title)"
                    " VALUES ($1, 'publication', $2, 1, 'real')",
                    workspace_id,
                    pub_id,
                )
            items = await conn.fetchval(
                "UPDATE workspaces w SET catalog_count = c.items, catalog_mark = c.mark FROM ("
                " SELECT count(*) FILTER (WHERE catalog_class IS NOT NULL AND kind <> 'artifact') AS items,"
                " greatest(max(seq), max(superseded_seq)) AS mark FROM associations WHERE workspace_id = $1"
                ") c WHERE w.id = $1 RETURNING c.items",
                workspace_id,
            )
        await conn.execute("ANALYZE associations")
    finally:
        await conn.close()
    return int(items)


async def time_queries(dsn: str, scope: str, workspaces: dict[int, str]) -> dict[tuple[int, int], list[float]]:
    """The first and the second page of a run's catalog as of now, at the database alone."""
    conn = await asyncpg.connect(dsn)
    samples: dict[tuple[int, int], list[float]] = {(n, page): [] for n in workspaces for page in (1, 2)}
    try:
        for i in range(WARMUP + ROUNDS):
            for n, wid in workspaces.items():
                repo = REPO.for_scope(scope)
                state = await repo.catalog_state(conn, workspace_id=wid)
                at: Position | None = Position.start(state, for_run=True)
                for page in (1, 2):
                    assert at is not None
                    started = time.perf_counter()
                    at = (await READER.read(conn, repo, wid, at, REAL_NEWEST)).next
                    if i >= WARMUP:
                        samples[(n, page)].append((time.perf_counter() - started) * 1000)
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
                items = {n: asyncio.run(fill(dsn, wid, n, pubs)) for n, wid in workspaces.items()}

                samples: dict[tuple[int, int], list[float]] = {(n, p): [] for n in workspaces for p in (1, 2)}
                for i in range(WARMUP + ROUNDS):
                    # Interleaved, so both sizes see the same machine load.
                    for n, wid in workspaces.items():
                        started = time.perf_counter()
                        page = api.get(f"/v1/workspaces/{wid}/catalog").json()
                        first = (time.perf_counter() - started) * 1000
                        started = time.perf_counter()
                        later = api.get(f"/v1/workspaces/{wid}/catalog", params={"cursor": page["next_cursor"]})
                        second = (time.perf_counter() - started) * 1000
                        if i == 0:
                            assert len(page["items"]) == REAL_NEWEST and page["omitted"] == items[n] - REAL_NEWEST
                            assert all(item["available"] for item in page["items"]), page["items"][:2]
                            assert later.status_code == 200 and later.json()["items"][0]["run_id"], later.text[:300]
                        if i >= WARMUP:
                            samples[(n, 1)].append(first)
                            samples[(n, 2)].append(second)
            ratios = {}
            for p in (1, 2):
                print(f"catalog page {p} through the gateway (limit {REAL_NEWEST}, one publication.check batch)")
                small = report(f"  workspace with {SMALL:>9,} associations", samples[(SMALL, p)])[0]
                large = report(f"  workspace with {large_size:>9,} associations", samples[(large_size, p)])[0]
                ratios[p] = large / small
                print(f"  ratio {large_size:,} / {SMALL:,} (median): {ratios[p]:.2f}")

            db = asyncio.run(time_queries(dsn, scope, workspaces))
            for p in (1, 2):
                print(f"page {p} of a run's catalog, the queries alone, at the database")
                small_db = report(f"  workspace with {SMALL:>9,} associations", db[(SMALL, p)])[0]
                large_db = report(f"  workspace with {large_size:>9,} associations", db[(large_size, p)])[0]
                print(f"  ratio {large_size:,} / {SMALL:,} (median): {large_db / small_db:.2f}")
            goal(f"catalog p50 at {large_size:,} ÷ at {SMALL} associations", ratios[1], 1.1, at_most=True)
        finally:
            stop_stack(stack.proc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
