"""The assets service as a real OS process, SIGKILLed between extraction and activation."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from pathlib import Path

import asyncpg

from shared.blobs import Blobs
from shared.bus import BusClient
from shared.children import Child
from shared.contracts import assets as c
from shared.settings import AssetsSettings
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support import documents
from tests.support.infra import Infra
from tests.support.probe import probe_until
from tests.support.service import service_process, settings_from

PAUSE = {"DOSSIER_ASSETS_PAUSE_BEFORE_ACTIVATE_SECONDS": "600"}
# A real process starts, extracts and recovers: each wait allows it a minute.
WAIT = {"timeout": 60.0, "interval": 0.1}


async def versions(dsn: str, source_id: str) -> list[tuple[int, str, int, int]]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT a.version, a.status, a.attempts, (SELECT count(*) FROM evidence e WHERE e.asset_id = a.id) AS n"
            " FROM asset_versions a JOIN sources s ON s.pk = a.source_pk WHERE s.source_id = $1 ORDER BY a.version",
            source_id,
        )
    finally:
        await conn.close()
    return [(r["version"], r["status"], r["attempts"], r["n"]) for r in rows]


async def test_killed_mid_activation_never_leaves_a_half_state(infra: Infra, bus: BusClient, tmp_path: Path) -> None:
    env = infra.settings_env("assets")
    settings: AssetsSettings = settings_from(env, AssetsSettings)
    assets = AssetsUnderTest(settings, Blobs(settings), bus)
    dsn, who, source = env["DOSSIER_DATABASE_URL"], actor(), f"src-{uuid.uuid4().hex[:6]}"
    children: list[Child] = []

    def start(name: str, extra: dict[str, str]) -> Child:
        child = service_process("assets", env | extra, tmp_path / name)
        children.append(child)
        child.start()
        return child

    async def healthy() -> None:
        await probe_until(lambda: bus.ping("assets", timeout=0.5), **WAIT)

    async def kill_while_paused(name: str, data: bytes) -> None:
        """Upload through a process that pauses after extraction, then SIGKILL it inside that pause."""
        child = start(name, PAUSE)
        await healthy()
        blob = await assets.put(data)
        pending = asyncio.create_task(
            bus.call_raw(c.UPLOAD, {"source_id": source, "blob": blob}, actor=who, timeout=60)
        )
        log = tmp_path / name / "assets.log"
        await probe_until(
            lambda: asyncio.sleep(0, log.exists() and "fault injection: pausing" in log.read_text()), **WAIT
        )
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        assert child.proc is not None
        child.proc.wait(10)
        pending.cancel()
        with contextlib.suppress(BaseException):
            await pending

    try:
        start("first", {})
        await healthy()
        v1 = await assets.upload(who, source, documents.big_pdf(3, seed=1))
        assert v1["status"] == "active"
        children[-1].stop()

        await kill_while_paused("paused", documents.big_pdf(3, seed=2))
        # The evidence of v2 was written in the activation transaction, which died uncommitted.
        assert await versions(dsn, source) == [(1, "active", 1, 3), (2, "extracting", 1, 0)]

        start("recovering", {})
        got = await settled(dsn, source)
        assert got == [(1, "superseded", 1, 3), (2, "active", 2, 3)]
        children[-1].stop()

        await kill_while_paused("paused-again", documents.big_pdf(3, seed=3))
        start("giving-up", {"DOSSIER_EXTRACT_ATTEMPTS": "1"})
        got = await settled(dsn, source)
        assert got == [(1, "superseded", 1, 3), (2, "active", 2, 3), (3, "failed", 1, 0)]
        v3 = (await bus.call_raw(c.GET_SOURCE, {"source_id": source}, actor=who))["versions"][2]
        assert v3["error"] == "extraction was interrupted 1 time"
    finally:
        for child in children:
            child.stop()


async def settled(dsn: str, source_id: str) -> list[tuple[int, str, int, int]]:
    """The source's versions (as `versions` gives them) once its last one is neither registered nor extracting."""

    async def last_settled() -> list[tuple[int, str, int, int]] | None:
        rows = await versions(dsn, source_id)
        return rows if rows and rows[-1][1] not in ("registered", "extracting") else None

    return await probe_until(last_settled, **WAIT)
