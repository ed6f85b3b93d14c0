"""The life of a version: registered → extracting → active (or failed), and recovery after a crash.

The evidence of a new version, the supersession of the previous active one and the activation commit in
ONE transaction, so a reader sees either the old version with its evidence or the new one with its own,
never a mix; a failure never touches the active version, and neither does a version that extracted no
passage (it fails rather than replace what readers can read). While a version is being ingested the ingesting
connection holds its claim (a session advisory lock); a process that dies loses its claim with its
connection, and the recovery sweep finishes such versions or marks them failed.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from pathlib import Path
from typing import Any

import asyncpg

from services.assets import language
from services.assets.output import ExtractionFailed
from services.assets.queueing import ClaimHolder, FairSlots
from services.assets.repository import AssetsMaintenance
from services.assets.sandbox import Sandbox
from services.assets.splitting import extract_file
from shared import tracing
from shared.contracts import assets as c
from shared.contracts.common import Ref
from shared.db import Database
from shared.metrics import EXTRACTION_FAILURES, EXTRACTION_SECONDS, EXTRACTION_WAITING
from shared.outbox import enqueue
from shared.settings import AssetsSettings

log = logging.getLogger("dossier.assets")
SETTLED = ("active", "failed", "superseded", "retired")
RECOVERY_QUEUE = "\x00recovery"
# Passages are written in batches while the parser still runs; each batch is one COPY. A batch goes as soon
# as the previous COPY has ended and a few passages wait (so the passages still unwritten when the parser
# ends are only those of the last moments), and at most this many wait behind a COPY that runs long.
_MIN_BATCH = 16
_MAX_BATCH = 200


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def evidence_prefix(asset_id: str) -> str:
    return f"ev_{asset_id.removeprefix('ast_')[:20]}_"


class EvidenceWriter:
    """Buffers passages and writes them with COPY in the background, so storing overlaps with parsing."""

    def __init__(self, conn: asyncpg.Connection, repo: AssetsMaintenance, *, asset_id: str, scope: str):
        self._conn, self._repo = conn, repo
        self._asset_id, self._scope = asset_id, scope
        self._prefix = evidence_prefix(asset_id)
        self._rows: list[tuple[Any, ...]] = []
        self._ord = 0
        self._task: asyncio.Task[None] | None = None

    async def add(self, locator: str, text: str, meta: dict[str, Any]) -> None:
        self._ord += 1
        # The language is judged here, not by the parser: the parser is not trusted to name a text search
        # configuration, and this side of the pipe has a core to spare while the parse has none.
        lang, ocr = language.detect(text), meta.get("ocr") is True
        evidence_id = f"{self._prefix}{self._ord}"
        self._rows.append(
            (evidence_id, self._asset_id, self._scope, self._ord, locator, text, sha256_text(text), lang, ocr)
        )
        idle = self._task is None or self._task.done()
        if len(self._rows) >= (_MIN_BATCH if idle else _MAX_BATCH):
            self._kick()

    def _kick(self) -> None:
        rows, self._rows = self._rows, []
        previous = self._task

        async def write() -> None:
            if previous is not None:
                await previous
            await self._repo.insert_evidence(self._conn, rows=rows)

        self._task = asyncio.create_task(write())

    async def finish(self) -> None:
        if self._rows:
            self._kick()
        if self._task is not None:
            await self._task

    async def abandon(self) -> None:
        """The transaction is about to roll back: let the last COPY end (it is short) so the connection is idle.

        Not cancelled: interrupting a COPY mid-stream is what would leave the connection in doubt.
        """
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


def version_event(row: asyncpg.Record) -> dict[str, Any]:
    return {"source_id": row["source_id"], "asset_id": row["asset_id"], "version": row["version"]}


class Lifecycle:
    def __init__(self, db: Database, sandbox: Sandbox, settings: AssetsSettings, repo: AssetsMaintenance):
        self._db = db
        self._sandbox = sandbox
        self._settings = settings
        self._repo = repo
        self.slots = FairSlots(settings.extract_concurrency, per_scope=settings.extract_queue_per_scope)
        EXTRACTION_WAITING.set_function(self.slots.waiting)
        self.claims = ClaimHolder(db.dsn, repo)

    async def ingest_when_free(self, asset_id: str, scope: str, path: Path) -> asyncpg.Record:
        """Wait for this scope's turn at a parser slot, holding no pooled connection, then ingest.

        The caller has the version's claim on the holder; it moves to the ingesting connection here.
        """
        async with self.slots.slot(scope):
            async with self._db.statement() as conn:
                await self.claims.let_go(asset_id)
                if await self._repo.try_claim(conn, asset_id=asset_id):
                    try:
                        row = await self._repo.get_version(conn, asset_id=asset_id)
                        assert row is not None
                        if row["status"] == "registered":
                            await self.ingest(conn, row, path)
                    finally:
                        await self._repo.release(conn, asset_id=asset_id)
        # Settled by us, or (when the claim was lost on the way) by the recovery sweep.
        return await self.wait_settled(asset_id)

    async def ingest(self, conn: asyncpg.Connection, row: asyncpg.Record, path: Path) -> None:
        """Extract and settle a version this connection has claimed, in a slot the caller holds."""
        async with conn.transaction():
            await self._repo.mark_extracting(conn, asset_id=row["asset_id"])
        try:
            async with conn.transaction():
                writer = EvidenceWriter(conn, self._repo, asset_id=row["asset_id"], scope=row["scope"])
                try:
                    delay = self._settings.assets_parse_delay_seconds
                    if delay > 0:
                        log.warning("fault injection: a slow parse of %.1f s for %s", delay, row["asset_id"])
                        await asyncio.sleep(delay)
                    started = time.perf_counter()
                    coverage = await extract_file(self._sandbox, path, row["kind"], writer.add, self.slots)
                    EXTRACTION_SECONDS.labels(row["kind"], coverage["status"]).observe(time.perf_counter() - started)
                    await writer.finish()
                except BaseException:
                    await writer.abandon()
                    raise
                pause = self._settings.assets_pause_before_activate_seconds
                if pause > 0:
                    log.warning("fault injection: pausing %.1f s before activating %s", pause, row["asset_id"])
                    await asyncio.sleep(pause)
                await self.activate(conn, row, coverage)
        except ExtractionFailed as exc:
            EXTRACTION_FAILURES.labels(row["kind"]).inc()
            async with conn.transaction():
                await self._fail(conn, row, str(exc))

    async def activate(self, conn: asyncpg.Connection, row: asyncpg.Record, coverage: dict[str, Any]) -> None:
        source = await self._repo.lock_source(conn, pk=row["source_pk"])
        extraction = c.Extraction.model_validate(coverage).model_dump()
        if source["status"] == "retired":
            await self._repo.settle(conn, asset_id=row["asset_id"], status="retired", extraction=extraction, error=None)
            return
        current = await self._repo.active_version(conn, source_pk=row["source_pk"])
        if current is not None and current["version"] > row["version"]:
            # A newer version won the race; this one is history from the start.
            await self._repo.settle(
                conn, asset_id=row["asset_id"], status="superseded", extraction=extraction, error=None
            )
            return
        if current is not None and not await self._repo.has_evidence(conn, asset_id=row["asset_id"]):
            # A version that offers no passage (blank pages, text no parser could read) never replaces one:
            # it fails, saying why, and the active version stays what readers and workspaces see.
            reason = f"nothing was extracted (no passage); version {current['version']} stays active"
            await self._fail(conn, row, reason, coverage=extraction)
            return
        if current is not None:
            await self._repo.set_status(conn, asset_id=current["id"], status="superseded")
        await self._repo.settle(conn, asset_id=row["asset_id"], status="active", extraction=extraction, error=None)
        if row["namespace"] != "":
            return  # run-local attachments stay quiet until promoted
        event = c.VersionActivated(
            **version_event(row),
            content_hash=row["content_hash"],
            kind=row["kind"],
            filename=row["filename"],
            run_id=row["run_id"],
            extraction=c.Extraction.model_validate(extraction),
            superseded=Ref(kind="source", id=row["source_id"], version=current["version"]) if current else None,
            created_at=row["created_at"],
        )
        await enqueue(conn, c.EVT_VERSION_ACTIVATED, event, scope=row["scope"])

    async def _fail(
        self, conn: asyncpg.Connection, row: asyncpg.Record, error: str, *, coverage: dict[str, Any] | None = None
    ) -> None:
        """`coverage`: what the parser did find, kept beside the reason (else the version offers nothing)."""
        source = await self._repo.lock_source(conn, pk=row["source_pk"])
        extraction = {"status": "failed", "units_total": 0, "units_extracted": 0, "notes": [error]}
        if coverage is not None:
            extraction |= {k: coverage[k] for k in ("units_total", "units_extracted")}
            extraction["notes"] = [*coverage["notes"], error]
        status = "retired" if source["status"] == "retired" else "failed"
        await self._repo.settle(conn, asset_id=row["asset_id"], status=status, extraction=extraction, error=error)
        if row["namespace"] != "":
            return
        event = c.VersionFailed(
            **version_event(row), content_hash=row["content_hash"], error=error, run_id=row["run_id"]
        )
        await enqueue(conn, c.EVT_VERSION_FAILED, event, scope=row["scope"])

    async def wait_settled(self, asset_id: str) -> asyncpg.Record:
        """For a reused version another request is still ingesting: its reply waits for the outcome."""
        deadline = asyncio.get_running_loop().time() + self._settings.parse_wall_seconds * 2 + 30
        while True:
            async with self._db.statement() as conn:
                row = await self._repo.get_version(conn, asset_id=asset_id)
            assert row is not None
            if row["status"] in SETTLED or asyncio.get_running_loop().time() > deadline:
                return row
            await asyncio.sleep(0.1)

    # -- recovery ------------------------------------------------------------------------------------

    async def recover(self, stage: Any) -> int:
        """Finish or fail every unfinished version nobody holds a claim on. Returns how many it settled."""
        async with self._db.statement() as conn:
            candidates = await self._repo.unfinished(conn, limit=100)
        settled = 0
        for asset_id in candidates:
            # The sweep waits its turn like any scope, and holds no connection while it waits.
            async with self.slots.slot(RECOVERY_QUEUE), self._db.statement() as conn:
                if not await self._repo.try_claim(conn, asset_id=asset_id):
                    continue  # a live ingestion, or a version waiting for its slot, holds it
                try:
                    row = await self._repo.get_version(conn, asset_id=asset_id)
                    if row is None or row["status"] not in ("registered", "extracting"):
                        continue
                    # The sweep's statements find nothing to do on an idle stack; only a recovery is traced.
                    with tracing.work_span("asset version recovery", None, {"dossier.asset_id": asset_id}):
                        await self._recover_one(conn, row, stage)
                    settled += 1
                finally:
                    await self._repo.release(conn, asset_id=asset_id)
        return settled

    async def _recover_one(self, conn: asyncpg.Connection, row: asyncpg.Record, stage: Any) -> None:
        if row["attempts"] >= self._settings.extract_attempts:
            log.warning("version %s was interrupted %d times; marking it failed", row["asset_id"], row["attempts"])
            async with conn.transaction():
                await self._fail(
                    conn, row, f"extraction was interrupted {row['attempts']} time{'' if row['attempts'] == 1 else 's'}"
                )
            return
        log.info("re-extracting interrupted version %s", row["asset_id"])
        try:
            staged = await stage(row)
        except Exception as exc:
            log.warning("the bytes of %s cannot be staged again: %s", row["asset_id"], exc)
            async with conn.transaction():
                await self._fail(conn, row, "the stored bytes are missing or do not match their hash")
            return
        try:
            await self.ingest(conn, row, staged.path)
        finally:
            staged.discard()

    async def sweep_forever(self, stage: Any) -> None:
        while True:
            try:
                await self.recover(stage)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the recovery sweep failed; it will run again")
            await asyncio.sleep(self._settings.recovery_interval_seconds)
