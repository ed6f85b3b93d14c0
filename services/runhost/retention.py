"""What runs leave behind, let go of as it stops being needed (DESIGN "A workspace over a year").

Every DOSSIER_RUN_STORAGE_SWEEP_SECONDS (default 60) each runhost process that runs workers deletes each
stored content that no run's file names any more (its last file was rewritten), once it has been untouched
for DOSSIER_RUN_FILES_GRACE_SECONDS. A writer touches a content before it puts the bytes and holds its row
while it indexes them, so a content a run still uses is never deleted.

Only runhost deletes run files, and only under `runs/` (shared/objectkeys.py).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import asyncpg
from minio.error import S3Error

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
    contents: int = 0


class StorageSweeper:
    def __init__(self, *, db: Database, blobs: Blobs, settings: RunhostSettings, batch: int = 50):
        self.db, self.blobs, self.settings, self.batch = db, blobs, settings, batch
        self.repo = StorageRepository()

    async def sweep_once(self) -> Swept:
        return Swept(contents=await self.let_go_of_contents())

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
