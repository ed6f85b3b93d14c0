"""What runs leave behind, let go of as it stops being needed (DESIGN "A workspace over a year").

Every DOSSIER_RUN_STORAGE_SWEEP_SECONDS (default 60) each runhost process that runs workers:
- trims the model-call journal of each run that has ended to what a resume needs (services/runhost/journal.py),
  and seals its ledger and file index: their rows become one document each, which their reads unfold
  (services/runhost/repository.py);
- with DOSSIER_RUN_RETENTION_DAYS set, releases the working files and journal of each run that ended longer
  ago than that: its file index and journal rows go, its per-run objects (files stored before the content
  store) are deleted, and `files_released_at` says when. The run, its ledger, answer, claims and PROV stay;
- deletes each stored content that no run's file names any more (its last file was released or rewritten),
  once it has been untouched for DOSSIER_RUN_FILES_GRACE_SECONDS. A writer touches a content before it puts
  the bytes and holds its row while it indexes them, so a content a run still uses is never deleted.

Only runhost deletes run files, and only under `runs/` (shared/objectkeys.py).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import asyncpg
from minio.error import S3Error

from services.runhost.journal import trimmed_entry
from services.runhost.memory import CONTENT_PREFIX
from services.runhost.storage_repository import StorageRepository
from shared.blobs import Blobs, content_key
from shared.db import Database
from shared.settings import RunhostSettings

log = logging.getLogger("dossier.runhost.retention")

# Contents deleted per transaction: their rows stay locked while their objects are deleted.
CONTENT_BATCH = 20


@dataclass
class Swept:
    trimmed: int = 0
    released: int = 0
    contents: int = 0


class StorageSweeper:
    def __init__(self, *, db: Database, blobs: Blobs, settings: RunhostSettings, batch: int = 50):
        self.db, self.blobs, self.settings, self.batch = db, blobs, settings, batch
        self.repo = StorageRepository()

    async def sweep_once(self) -> Swept:
        swept = Swept(trimmed=await self.trim_journals())
        if self.settings.run_retention_days is not None:
            swept.released = await self.release_expired(self.settings.run_retention_days)
        swept.contents = await self.let_go_of_contents()
        return swept

    async def trim_journals(self) -> int:
        async with self.db.statement() as conn:
            run_ids = await self.repo.untrimmed_runs(conn, limit=self.batch)
        trimmed = 0
        for run_id in run_ids:
            async with self.db.transaction() as conn:
                for row in await self.repo.journal_entries(conn, run_id=run_id):
                    try:
                        response, result = trimmed_entry(row["response"], row["result"])
                    except (TypeError, KeyError, AttributeError, ValueError) as exc:
                        # A row of a shape no release wrote: kept whole, so it never stops the sweep.
                        log.warning("run %s: journal row %s kept untrimmed: %r", run_id, row["seq"], exc)
                        continue
                    if (response, result) != (row["response"], row["result"]):
                        await self.repo.set_journal_entry(conn, seq=row["seq"], response=response, result=result)
                if await self.repo.mark_trimmed(conn, run_id=run_id):
                    await self.repo.seal_ledger(conn, run_id=run_id)
                    await self.repo.seal_files(conn, run_id=run_id)
                    trimmed += 1
        return trimmed

    async def release_expired(self, days: float) -> int:
        async with self.db.statement() as conn:
            run_ids = await self.repo.runs_past_retention(conn, days=days, limit=self.batch)
        released = 0
        for run_id in run_ids:
            # Objects first, then the rows that name them: a crash between leaves the rows, and the next sweep
            # deletes the (already gone) objects again; never an object no row names.
            async with self.db.statement() as conn:
                own = await self.repo.per_run_files(conn, run_id=run_id)
            for row in own:
                await self._delete(f"runs/{run_id}/{row['path']}@{row['sha256']}")
            async with self.db.transaction() as conn:
                released += await self.repo.release(conn, run_id=run_id)
        if released:
            log.info("released the working files and journal of %d runs past retention", released)
        return released

    async def let_go_of_contents(self) -> int:
        grace = self.settings.run_files_grace_seconds
        deleted = 0
        while True:
            async with self.db.transaction() as conn:
                unused = await self.repo.lock_unreferenced(conn, grace_seconds=grace, limit=CONTENT_BATCH)
                for sha256 in unused:
                    await self._delete(content_key(sha256, CONTENT_PREFIX))
                await self.repo.forget_contents(conn, sha256s=unused)
            deleted += len(unused)
            if len(unused) < CONTENT_BATCH:
                return deleted

    async def _delete(self, key: str) -> None:
        try:
            await self.blobs.delete(key)
        except S3Error as exc:
            if exc.code not in ("NoSuchKey", "NoSuchObject", "NotFound"):
                raise

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.run_storage_sweep_seconds)
            try:
                await self.sweep_once()
            except (OSError, asyncpg.PostgresError, S3Error) as exc:
                log.warning("storage sweep failed: %s", exc)
