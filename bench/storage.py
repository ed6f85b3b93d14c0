"""What a run leaves behind: database plus object bytes per run on a 10-source workspace, at run 10 and at
the last run (`--runs N`, default 30; the issue's figure is at 300), with a GOAL line for each (at most
60 kB a run). `--retention-days D` runs the stack with DOSSIER_RUN_RETENTION_DAYS=D (0: each run's files
and journal are let go as soon as it ended).

One workspace with 10 sources (PDFs of three pages) is run day after day: one extractive run after another,
the question taken in turn from a handful, on a stack in use (three waves of four runs at once on another
workspace first: the first pages of every table, and the room of the runs in flight, are the stack's cost, not
a run's). Time is compressed: the sweeps run every second, published events are kept 5 s and autovacuum wakes
every second, as a day between runs would let them all act. At run 10 and at the last run the bench adds up
the bytes of every table of every service database (`pg_total_relation_size` with indexes and TOAST, as the
superuser, after a VACUUM such as a day's autovacuum would have made; runhost's table by table) and of every
object file in the stack's object store (run files by content, `runs/sha256`; per run, `runs/<run>`, as stored
before the content store; documents and reports, `sha256`). A run's bytes are the growth since the workspace
was seeded, divided by the runs so far, so run 10's figure and the last run's say whether storage per run
stays bounded as history grows. The runs table, the ledger and publications grow with every run and stay; the
run files and the model-call journal are kept once per content, trimmed, or let go.

Starts its own stack in a temporary folder, measures, prints, and stops it. Never part of the test run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._stats import goal
from tests.support.api import Api
from tests.support.documents import pdf
from tests.support.stack import RunningStack, start_stack, stop_stack

SOURCES = 10
# Warm-up: waves of runs at once, as a stack in use serves several workspaces.
WARM_UP_RUNS = 4
WARM_UP_WAVES = 3
GOAL_BYTES = 60_000
QUESTIONS = (
    "What do the Fund X liquidity reports conclude about redemptions?",
    "How does Fund X meet redemptions under stress?",
    "Which liquidity risks of Fund X are unresolved?",
    "What do the reports say about Fund X cash buffers and gates?",
    "Has Fund X liquidity changed since the last review?",
)
DATABASES = ("runhost", "publication", "workspace", "assets", "artifact", "gateway")
# Runhost's tables shown one by one; the rest of its tables are summed as `runhost`.
RUNHOST_TABLES = ("ledger", "ledger_sealed", "runs", "run_files", "run_files_sealed", "file_contents", "model_journal")
# Sweeps every second, contents let go 5 s after their last use, published events kept 5 s: a day of runs
# is compressed into minutes here, so the defaults (60 s, 600 s, a day) would count the last ten minutes'
# plan versions, and every event of the bench, as kept.
SWEEPS = {
    "DOSSIER_RUN_STORAGE_SWEEP_SECONDS": "1",
    "DOSSIER_RUN_FILES_GRACE_SECONDS": "5",
    "DOSSIER_OUTBOX_KEEP_SECONDS": "5",
}


def source_pages(i: int) -> list[str]:
    return [
        " ".join(
            f"Report {i} page {page}: Fund X met redemption request {j} with {10 + (i * j + page) % 80}% of its"
            f" liquid assets, and its cash buffer stood at {5 + (i + j) % 20}% of net assets."
            for j in range(10)
        )
        for page in range(1, 4)
    ]


def seed(api: Api) -> str:
    ws = str(api.workspace(goal="Assess the liquidity risk of Fund X")["id"])
    for i in range(SOURCES):
        source = api.upload(pdf(source_pages(i)), f"liquidity-{i:02d}", f"liquidity-{i:02d}.pdf", ws)
        assert source["status"] == "active", source
    api.wait_catalog(ws, SOURCES)
    return ws


async def service_databases(stack: RunningStack) -> AsyncIterator[tuple[str, asyncpg.Connection]]:
    """Each service database that exists, connected as the superuser."""
    for database in DATABASES:
        try:
            conn = await asyncpg.connect(stack.admin_dsn(database))
        except asyncpg.InvalidCatalogNameError:
            continue
        try:
            yield database, conn
        finally:
            await conn.close()


async def database_bytes(stack: RunningStack) -> dict[str, int]:
    """Bytes of every table (with its indexes and TOAST) by database, each database vacuumed first
    (`vacuum`); runhost's by table, as most of it is."""
    sizes: dict[str, int] = {}
    async for database, conn in service_databases(stack):
        await vacuum(conn)
        rows = await conn.fetch(
            "SELECT c.relname, pg_total_relation_size(c.oid) AS size FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind IN ('r', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        )
        for row in rows:
            part = (
                f"runhost.{row['relname']}" if database == "runhost" and row["relname"] in RUNHOST_TABLES else database
            )
            sizes[part] = sizes.get(part, 0) + int(row["size"])
    return sizes


def object_bytes(stack: RunningStack) -> dict[str, int]:
    """Bytes of the object files: run files by content (`runs/sha256`), per run (`runs/<run>`, before the
    content store), and the content-addressed documents and reports (`sha256`)."""
    sizes: dict[str, int] = {}
    root = stack.local_home() / "objects" / "dossier"
    for path in root.rglob("*"):
        if path.is_file():
            parts = path.relative_to(root).parts
            prefix = (
                "runs/sha256" if parts[:2] == ("runs", "sha256") else "runs/<run>" if parts[0] == "runs" else parts[0]
            )
            sizes[prefix] = sizes.get(prefix, 0) + path.stat().st_size
    return sizes


async def vacuum(conn: asyncpg.Connection) -> None:
    """VACUUM a service database, as autovacuum would have done in the day after a run.

    A table's first vacuum gives it a free space map (24 kB a table, whatever its size): when that fell
    among the measured runs, it was counted as theirs, and a figure taken just before autovacuum's next
    turn and one taken just after differed by more than 10 kB per run at run 10. Vacuumed after the
    warm-up (the maps of the tables it filled are the stack's) and before each measurement, the figure
    counts what the runs left, not where autovacuum's naptime fell."""
    await conn.execute("VACUUM")


async def vacuum_every_database(stack: RunningStack) -> None:
    async for _, conn in service_databases(stack):
        await vacuum(conn)


def measure(stack: RunningStack) -> dict[str, int]:
    found = {f"db:{k}": v for k, v in asyncio.run(database_bytes(stack)).items()}
    return found | {f"objects:{k}": v for k, v in object_bytes(stack).items()}


def per_run(now: dict[str, int], base: dict[str, int], runs: int) -> dict[str, float]:
    return {k: (now.get(k, 0) - base.get(k, 0)) / runs for k in sorted(set(now) | set(base))}


def show(label: str, parts: dict[str, float]) -> float:
    total = sum(parts.values())
    print(f"  {label}: {total / 1000:6.1f} kB per run")
    for name, value in parts.items():
        if abs(value) >= 50:
            print(f"      {name:<28} {value / 1000:7.1f} kB")
    return total


async def vacuum_as_a_day_would(stack: RunningStack) -> None:
    """Autovacuum every second instead of every minute: a day of runs is compressed into minutes here, and
    between two runs a day apart autovacuum has long made the rows a run let go (its live ledger rows,
    sealed at its end; published events) room for the next run's."""
    conn = await asyncpg.connect(stack.admin_dsn())
    try:
        await conn.execute("ALTER SYSTEM SET autovacuum_naptime = '1s'")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


def warm_up(api: Api) -> None:
    """Runs on another workspace first, several at once, as on a stack in use: its first use allocates the
    first pages of every table and index (some hundred kB on an empty stack), and the tables whose rows live
    only while a run does (runhost's live ledger and run files; every outbox) grow to the room the runs in
    flight need, their indexes' emptied pages and free space maps included (24 kB each), which later runs
    reuse. Neither is a run's cost, and a workspace on a stack in use never pays them. With one warm-up run
    the figure at run 10 was 59 to 67 kB on the same code, with five one after another 56 to 65, as that
    room happened to grow among the measured runs or not."""
    ws = str(api.workspace(goal="Warm the stack up")["id"])
    source = api.upload(pdf(source_pages(99)), "warm-up", "warm-up.pdf", ws)
    assert source["status"] == "active", source
    api.wait_catalog(ws, 1)
    for wave in range(WARM_UP_WAVES):
        started = [api.start_run(ws, QUESTIONS[(wave + n) % len(QUESTIONS)])["id"] for n in range(WARM_UP_RUNS)]
        for run_id in started:
            run = api.wait_run(run_id, timeout=600)
            assert run["status"] == "completed", run["error"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs on the workspace (the issue's figure: 300)")
    parser.add_argument(
        "--retention-days", help="DOSSIER_RUN_RETENTION_DAYS for the stack (unset: keep every run's files)"
    )
    args = parser.parse_args()
    assert args.runs >= 10, "the figure at run 10 needs at least 10 runs"
    env = SWEEPS | ({"DOSSIER_RUN_RETENTION_DAYS": args.retention_days} if args.retention_days else {})
    with tempfile.TemporaryDirectory(prefix="dossier-bench-storage-") as tmp:
        stack = start_stack(Path(tmp) / "home", extra_env=env)
        try:
            api = Api(stack)
            asyncio.run(vacuum_as_a_day_would(stack))
            warm_up(api)
            time.sleep(7)
            asyncio.run(vacuum_every_database(stack))
            ws = seed(api)
            time.sleep(7)
            base = measure(stack)
            figures: dict[int, dict[str, float]] = {}
            for n in range(1, args.runs + 1):
                run = api.wait_run(api.start_run(ws, QUESTIONS[n % len(QUESTIONS)])["id"], timeout=600)
                assert run["status"] == "completed", run["error"]
                if n in (10, args.runs):
                    # The sweeps of the run's end (journal, retention, contents let go) come first.
                    time.sleep(7)
                    figures[n] = per_run(measure(stack), base, n)
        finally:
            stop_stack(stack.proc)
    kept = f"retention {args.retention_days} days" if args.retention_days else "files kept (no retention)"
    print(f"bytes left behind per run (database tables + object files), {SOURCES} sources, {args.runs} runs, {kept}:")
    totals = {n: show(f"run {n:>3}", parts) for n, parts in figures.items()}
    for n, total in totals.items():
        goal(f"storage per run at run {n}", total / 1000, GOAL_BYTES / 1000, at_most=True, unit=" kB")


if __name__ == "__main__":
    main()
