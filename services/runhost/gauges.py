"""Runs by status, for the metrics: counted from the database, so every runhost process reports the truth."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg

from services.runhost.repository import WorkerRuns
from shared.contracts.runhost import RunStatus
from shared.db import Database
from shared.metrics import RUNS

STATUSES: tuple[RunStatus, ...] = ("admitted", "running", "completed", "failed", "cancelled")


async def count_runs_forever(db: Database, repo: WorkerRuns, *, interval: float = 5.0) -> None:
    while True:
        with contextlib.suppress(asyncpg.PostgresError, OSError):
            async with db.statement() as conn:
                counts = await repo.count_by_status(conn)
            for status in STATUSES:
                RUNS.labels(status).set(counts.get(status, 0))
        await asyncio.sleep(interval)
