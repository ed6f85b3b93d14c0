"""Import from approved roots (and nothing outside them), and racing uploads of the same bytes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from services.assets.app import create_app
from shared.blobs import Blobs
from shared.bus import BusClient
from shared.contracts import assets as c
from shared.errors import Invalid, NotFound, TooLarge
from shared.settings import AssetsSettings
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support import documents
from tests.support.service import running


@pytest.fixture
async def rooted(
    make_settings: Callable[..., AssetsSettings], bus: BusClient, tmp_path: Path
) -> AsyncIterator[tuple[AssetsUnderTest, Path, Path]]:
    root, outside = tmp_path / "approved", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    settings = make_settings(DOSSIER_APPROVED_ROOTS=f"docs={root}", DOSSIER_MAX_UPLOAD_BYTES="100000")
    async with running(create_app(settings)):
        yield AssetsUnderTest(settings, Blobs(settings), bus), root, outside


async def test_import_reads_only_inside_the_root(rooted: tuple[AssetsUnderTest, Path, Path]) -> None:
    assets, root, outside = rooted
    who = actor()
    (root / "sub" / "note.txt").write_text("Imported liquidity note.\n")
    v = await assets.bus.call_raw(
        c.IMPORT, {"root": "docs", "path": "sub/note.txt", "source_id": "note", "workspace_id": "ws_9"}, actor=who
    )
    assert (v["version"], v["status"], v["kind"], v["filename"]) == (1, "active", "text", "note.txt")
    again = await assets.bus.call_raw(
        c.IMPORT, {"root": "docs", "path": "./sub/note.txt", "source_id": "note"}, actor=who
    )
    assert again["reused"] is True and again["asset_id"] == v["asset_id"]
    stored = await assets.blobs.get_bytes(f"sha256/{v['content_hash'][:2]}/{v['content_hash']}")
    assert stored == b"Imported liquidity note.\n"

    (outside / "secret.txt").write_text("outside the root")
    os.symlink(outside / "secret.txt", root / "link.txt")
    os.symlink(outside, root / "sub" / "escape")
    os.symlink("../sub/note.txt", root / "sub" / "inside-link.txt")
    for path in ["../outside/secret.txt", str(outside / "secret.txt"), "link.txt", "sub/escape/secret.txt", ".", "sub"]:
        with pytest.raises(Invalid) as err:
            await assets.bus.call_raw(c.IMPORT, {"root": "docs", "path": path, "source_id": "x"}, actor=who)
        assert err.value.details["field"] == "path", path
    # A symlink that stays inside the root is fine: only the resolved path matters.
    inner = await assets.bus.call_raw(
        c.IMPORT, {"root": "docs", "path": "sub/inside-link.txt", "source_id": "note"}, actor=who
    )
    assert inner["reused"] is True
    with pytest.raises(Invalid) as err:
        await assets.bus.call_raw(c.IMPORT, {"root": "elsewhere", "path": "a.txt", "source_id": "x"}, actor=who)
    assert err.value.details["field"] == "root"
    with pytest.raises(NotFound):
        await assets.bus.call_raw(c.IMPORT, {"root": "docs", "path": "missing.txt", "source_id": "x"}, actor=who)
    (root / "big.txt").write_bytes(b"a" * 100_001)
    with pytest.raises(TooLarge) as big:
        await assets.bus.call_raw(c.IMPORT, {"root": "docs", "path": "big.txt", "source_id": "x"}, actor=who)
    assert big.value.details["limit"] == 100_000


@pytest.fixture
async def two_replicas(make_settings: Callable[..., AssetsSettings], bus: BusClient) -> AsyncIterator[AssetsUnderTest]:
    """Two service instances on one database and queue group: the uploads really do race."""
    settings = make_settings()
    async with AsyncExitStack() as stack:
        for _ in range(2):
            await stack.enter_async_context(running(create_app(settings)))
        yield AssetsUnderTest(settings, Blobs(settings), bus)


async def test_twenty_concurrent_identical_uploads_make_one_version(two_replicas: AssetsUnderTest) -> None:
    assets, who = two_replicas, actor()
    blob = await assets.put(documents.big_pdf(30, seed=5))
    results = await asyncio.gather(
        *(assets.bus.call_raw(c.UPLOAD, {"source_id": "race", "blob": blob}, actor=who, timeout=120) for _ in range(20))
    )
    assert len({r["asset_id"] for r in results}) == 1
    assert sorted(r["reused"] for r in results) == [False] + [True] * 19
    assert {(r["version"], r["status"]) for r in results} == {(1, "active")}
    async with assets.db() as conn:
        assert await conn.fetchval("SELECT count(*) FROM asset_versions") == 1
        assert await conn.fetchval("SELECT count(*) FROM evidence") == 30


async def test_racing_new_versions_leave_the_newest_active(two_replicas: AssetsUnderTest) -> None:
    assets, who = two_replicas, actor()
    blobs = [await assets.put(documents.big_pdf(5, seed=100 + i)) for i in range(6)]
    await asyncio.gather(
        *(assets.bus.call_raw(c.UPLOAD, {"source_id": "S", "blob": b}, actor=who, timeout=120) for b in blobs)
    )
    source = await assets.bus.call_raw(c.GET_SOURCE, {"source_id": "S"}, actor=who)
    statuses = [v["status"] for v in source["versions"]]
    assert statuses == ["superseded"] * 5 + ["active"] and source["active_version"] == 6
