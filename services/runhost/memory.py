"""A run's working memory: files under `runs/<run_id>/` in object storage, indexed in runhost's database.

plan.md (the goal, the question, the source list, the next steps), sources/<name>.txt (what was read,
lossless), notes/<name>.md (one per source: a note means the source is done), draft.md and catalog.md
(the catalog as listed). The index
row is written after the bytes and under the lease fence, so a stale worker's file never counts. Each
version of a file has its own key (`<path>@<sha256>`), so a stale worker's bytes land beside the current
ones instead of over them, and only the fenced index says which version is the file.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from services.runhost.leases import StaleLease
from services.runhost.repository import RunRepository
from shared.blobs import Blobs
from shared.contracts.runhost import RUN_FILE_PATTERN
from shared.db import Database
from shared.errors import Invalid, NotFound, too_long

PATH = re.compile(RUN_FILE_PATTERN)
MAX_FILE_CHARS = 4 * 1024 * 1024


def source_name(kind: str, id: str, version: int | None) -> str:
    """A file-safe, stable name for a material: `pub_ab12@v1`, `src-report@v3-page_2`."""
    raw = f"{id}@v{version}" if version is not None else id
    return re.sub(r"[^A-Za-z0-9_.@-]", "_", raw)[:120]


def validate_path(path: str) -> str:
    if not PATH.match(path):
        raise Invalid("not a working-file path of a run", {"field": "path", "path": path[:300]})
    return path


def pointer(path: str, text: str, preview_chars: int = 160) -> str:
    """What the model sees instead of a body: `[sources/S17.txt] (13,624 chars) begins: …`."""
    head = " ".join(text[:preview_chars].split())
    return f"[{path}] ({len(text):,} chars) begins: {head}…"


class RunFiles:
    def __init__(self, blobs: Blobs, db: Database, repo: RunRepository, run_id: str, epoch: int | None):
        self._blobs, self._db, self._repo = blobs, db, repo
        self.run_id, self.epoch = run_id, epoch

    def key(self, path: str, sha256: str) -> str:
        return f"runs/{self.run_id}/{path}@{sha256}"

    async def write(
        self,
        path: str,
        text: str,
        *,
        provenance: dict[str, Any] | None = None,
        with_record: Callable[[asyncpg.Connection], Awaitable[bool]] | None = None,
    ) -> int:
        """Store the bytes, then index them; `with_record` (a ledger row) commits in the same transaction,
        so a crash never leaves a source read without its file, or a file without its read."""
        validate_path(path)
        if len(text) > MAX_FILE_CHARS:
            message = too_long(f"{path} (a run's working file)", len(text), MAX_FILE_CHARS)
            raise Invalid(message, {"limit": MAX_FILE_CHARS, "size": len(text)})
        data = text.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        await self._blobs.put_bytes(self.key(path, digest), data, content_type="text/plain; charset=utf-8")
        async with self._db.transaction() as conn:
            if with_record is not None and not await with_record(conn):
                raise StaleLease(self.run_id)
            recorded = await self._repo.upsert_file(
                conn,
                run_id=self.run_id,
                path=path,
                size=len(data),
                sha256=digest,
                epoch=self.epoch,
                provenance=provenance,
            )
        if not recorded:
            raise StaleLease(self.run_id)
        return len(text)

    async def read(self, path: str) -> str:
        validate_path(path)
        async with self._db.pool.acquire() as conn:
            row = await self._repo.get_file(conn, run_id=self.run_id, path=path)
        if row is None:
            raise NotFound("no such file in this run", {"path": path})
        return (await self._blobs.get_bytes(self.key(path, row["sha256"]))).decode("utf-8")

    async def provenance(self, path: str) -> dict[str, Any] | None:
        async with self._db.pool.acquire() as conn:
            row = await self._repo.get_file(conn, run_id=self.run_id, path=path)
        if row is None or row["ref"] is None:
            return None
        return {"ref": row["ref"], "content_hash": row["content_hash"], "locator": row["locator"]}

    async def listing(self) -> dict[str, int]:
        async with self._db.pool.acquire() as conn:
            rows = await self._repo.list_files(conn, run_id=self.run_id)
        return {r["path"]: r["size"] for r in rows}
