"""A run's working memory: files under `runs/<run_id>/` in object storage, indexed in runhost's database.

plan.md (the goal, the question, the source list, the next steps), sources/<name>.txt (what was read,
lossless), notes/<name>.md (one per source: a note means the source is done), draft.md and catalog.md
(the catalog as listed). The index
row is written after the bytes and under the lease fence, so a stale worker's file never counts.

The bytes are stored once per content, at `runs/sha256/ab/<sha256>` (the hash of the text; the object holds
it deflated with zlib, as run files are text that packs to a third or less): the same passage read by a hundred
runs, or a plan written back unchanged, is one object. Each version of a file is then its own key, so a
stale worker's bytes land beside the current ones instead of over them, and only the fenced index says
which version is the file. `file_contents` counts the index rows naming each content; one no row names
is let go after a grace period (services/runhost/retention.py), and a writer that finds its content let
go between its put and its index row stores it again. Files indexed before the content store keep their
per-run keys (`runs/<run_id>/<path>@<sha256>`).

Since a content's key names its bytes for good, the run host keeps the texts it wrote or read last in memory
by their hash (`ContentCache`, bounded in bytes): a read still asks the index which content the file is, and
only a content not kept is fetched from object storage.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import asyncpg
from minio.error import S3Error

from services.runhost.leases import StaleLease
from services.runhost.ledger import RowWriter
from services.runhost.repository import FileIndexed, WorkerRuns
from services.runhost.storage_repository import StorageRepository
from shared.blobs import Blobs, content_key
from shared.contracts.runhost import RUN_FILE_PATTERN
from shared.db import Database
from shared.errors import Invalid, NotFound, too_long

PATH = re.compile(RUN_FILE_PATTERN)
MAX_FILE_CHARS = 4 * 1024 * 1024
# Under runs/, beside the per-run folders (a run id never is `sha256`): runhost's key reaches both.
CONTENT_PREFIX = "runs/sha256"
# A content let go between a writer's put and its index row, or a deadlock between two writers that
# swap contents (A→B beside B→A): the write is tried again, this many times in all.
WRITE_ATTEMPTS = 5
# Texts of run files kept in the run host's memory, by content: this many bytes in all, none larger than
# CACHED_FILE_BYTES. A step reads plan.md and a source file it has just written; each would be a round trip
# to object storage.
CACHE_BYTES = 32 * 1024 * 1024
CACHED_FILE_BYTES = 1024 * 1024


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


class _NotIndexed(Exception):
    """A file not indexed in the transaction of its record, which then rolls back."""

    def __init__(self, indexed: FileIndexed):
        super().__init__(indexed)
        self.indexed = indexed


class ContentCache:
    """Run file texts by the hash of their content, the most recently used kept up to a number of bytes. A
    content's hash names its bytes for good, so a hit is always the text the index row names: the row is
    still read each time (it says which content is the file now), only the bytes are spared."""

    def __init__(self, limit: int = CACHE_BYTES, largest: int = CACHED_FILE_BYTES):
        self.limit, self.largest = limit, largest
        self._texts: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self.size = 0

    def get(self, sha256: str) -> str | None:
        kept = self._texts.get(sha256)
        if kept is None:
            return None
        self._texts.move_to_end(sha256)
        return kept[0]

    def put(self, sha256: str, text: str, size: int) -> None:
        if size > self.largest or sha256 in self._texts:
            return
        self._texts[sha256] = (text, size)
        self.size += size
        while self.size > self.limit:
            _, (_, dropped) = self._texts.popitem(last=False)
            self.size -= dropped


class RunFiles:
    def __init__(
        self,
        blobs: Blobs,
        db: Database,
        repo: WorkerRuns,
        run_id: str,
        epoch: int | None,
        cache: ContentCache | None = None,
    ):
        self._blobs, self._db, self._repo = blobs, db, repo
        self._contents = StorageRepository()
        self._cache = cache or ContentCache(limit=0)
        self.run_id, self.epoch = run_id, epoch

    def key(self, path: str, sha256: str, *, by_content: bool = True) -> str:
        return content_key(sha256, CONTENT_PREFIX) if by_content else f"runs/{self.run_id}/{path}@{sha256}"

    async def write(
        self,
        path: str,
        text: str,
        *,
        provenance: dict[str, Any] | None = None,
        with_record: RowWriter | None = None,
    ) -> int:
        """Store the bytes, then index them; `with_record` (a ledger row, `RunLedger.read_row`) commits in the
        same transaction, so a crash never leaves a source read without its file, or a file without its read."""
        validate_path(path)
        if len(text) > MAX_FILE_CHARS:
            message = too_long(f"{path} (a run's working file)", len(text), MAX_FILE_CHARS)
            raise Invalid(message, {"limit": MAX_FILE_CHARS, "size": len(text)})
        data = text.encode("utf-8")
        digest = hashlib.sha256(data).hexdigest()
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            generation = await self._store(digest, data)
            try:
                recorded = await self._index(path, digest, len(data), generation, provenance, with_record)
            except asyncpg.DeadlockDetectedError:
                if attempt == WRITE_ATTEMPTS:
                    raise
                continue
            if not recorded:
                continue  # let go since it was touched: stored again
            self._cache.put(digest, text, len(data))
            return len(text)
        raise RuntimeError(f"{path} of run {self.run_id}: its content was let go {WRITE_ATTEMPTS} times while written")

    async def _store(self, digest: str, data: bytes) -> int:
        """The content's generation, its bytes put unless a writer already stored them."""
        async with self._db.statement() as conn:
            generation, stored = await self._contents.touch_content(conn, sha256=digest, size=len(data))
        if not stored:
            key = content_key(digest, CONTENT_PREFIX)
            await self._blobs.put_bytes(key, zlib.compress(data, 6), content_type="application/zlib")
        return generation

    async def _index(
        self,
        path: str,
        digest: str,
        size: int,
        generation: int,
        provenance: dict[str, Any] | None,
        with_record: RowWriter | None,
    ) -> bool:
        """Index the file under the lease fence (StaleLease when fenced out, nothing kept); false when the
        content was let go since it was touched (nothing kept either). Without a record that is one statement;
        with one, the record and the index commit in one transaction."""
        if with_record is None:
            async with self._db.statement() as conn:
                indexed = await self._index_in(conn, path, digest, size, generation, provenance)
        else:
            try:
                async with self._db.transaction() as conn:
                    if not await with_record(conn):
                        raise StaleLease(self.run_id)
                    indexed = await self._index_in(conn, path, digest, size, generation, provenance)
                    if indexed != "indexed":
                        raise _NotIndexed(indexed)  # the record is rolled back: never kept without its file
            except _NotIndexed as exc:
                indexed = exc.indexed
        if indexed == "fenced":
            raise StaleLease(self.run_id)
        return indexed == "indexed"

    async def _index_in(
        self,
        conn: asyncpg.Connection,
        path: str,
        digest: str,
        size: int,
        generation: int,
        provenance: dict[str, Any] | None,
    ) -> FileIndexed:
        return await self._repo.index_file(
            conn,
            run_id=self.run_id,
            path=path,
            size=size,
            sha256=digest,
            generation=generation,
            epoch=self.epoch,
            provenance=provenance,
        )

    async def entry(self, path: str) -> Mapping[str, Any] | None:
        """The file's index row (which content it is, and what it is a copy of), or None."""
        validate_path(path)
        async with self._db.statement() as conn:
            return await self._repo.get_file(conn, run_id=self.run_id, path=path)

    async def read(self, path: str) -> str:
        return (await self.read_indexed(path))[0]

    async def read_indexed(self, path: str) -> tuple[str, Mapping[str, Any]]:
        """The file's text and its index row, read once."""
        row = await self.entry(path)
        if row is None:
            raise NotFound("no such file in this run", {"path": path})
        return await self.text(path, row), row

    async def text(self, path: str, row: Mapping[str, Any]) -> str:
        """The text of the content `row` (from `entry`) names."""
        if row["by_content"] and (kept := self._cache.get(row["sha256"])) is not None:
            return kept
        try:
            data = await self._blobs.get_bytes(self.key(path, row["sha256"], by_content=row["by_content"]))
        except S3Error as exc:
            if exc.code != "NoSuchKey":
                raise
            # A run's own (pre-content-store) file deleted by its release a moment before its row goes.
            raise NotFound("the file's bytes were let go", {"path": path}) from exc
        if not row["by_content"]:
            return data.decode("utf-8")
        data = zlib.decompress(data)
        if hashlib.sha256(data).hexdigest() != row["sha256"]:
            raise RuntimeError(f"the stored content of {path} (run {self.run_id}) does not match its hash")
        text = data.decode("utf-8")
        self._cache.put(row["sha256"], text, len(data))
        return text

    async def provenance(self, path: str) -> dict[str, Any] | None:
        return provenance_of(await self.entry(path))

    async def listing(self) -> dict[str, int]:
        async with self._db.statement() as conn:
            rows = await self._repo.list_files(conn, run_id=self.run_id)
        return {r["path"]: r["size"] for r in rows}


def provenance_of(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What a file's index row says it is a copy of: None for the run's own writing."""
    if row is None or row["ref"] is None:
        return None
    return {"ref": row["ref"], "content_hash": row["content_hash"], "locator": row["locator"]}
