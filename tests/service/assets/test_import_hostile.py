"""Files in an approved root that are not files: FIFOs, devices, sockets, directories, links out, and a read
that hangs. Each import is refused or bounded, and never takes the threads another scope's work needs."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from services.assets import acquisition
from services.assets.app import create_app
from shared.blobs import Blobs
from shared.bus import BusClient
from shared.contracts import assets as c
from shared.contracts.common import Actor
from shared.errors import Invalid, Timeout
from shared.settings import AssetsSettings
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support.probe import probe_until
from tests.support.service import running

# More than the six threads of the default executor on two cores, and than the import threads.
CONCURRENT = 12
FIFO = "a FIFO (named pipe)"


@pytest.fixture
async def rooted(
    make_settings: Callable[..., AssetsSettings], bus: BusClient, tmp_path: Path
) -> AsyncIterator[tuple[AssetsUnderTest, Path]]:
    root = tmp_path / "approved"
    root.mkdir()
    settings = make_settings(DOSSIER_APPROVED_ROOTS=f"docs={root}", DOSSIER_MAX_UPLOAD_BYTES="100000")
    async with running(create_app(settings)):
        yield AssetsUnderTest(settings, Blobs(settings), bus), root


def release_fifos(paths: list[Path], seconds: float = 60.0) -> None:
    """Opens and closes each FIFO as a writer, again and again, on a daemon thread: a reader blocked in its
    open (the code before the fix) then gets its end of file, so a failing test still stops its service."""

    def cycle() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for path in paths:
                try:
                    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
                except OSError:
                    continue
                time.sleep(0.02)
                os.close(fd)
            time.sleep(0.02)

    threading.Thread(target=cycle, daemon=True).start()


async def import_file(assets: AssetsUnderTest, who: Actor, path: str, *, timeout: float = 60) -> dict[str, Any]:
    payload = {"root": "docs", "path": path, "source_id": "x"}
    result: dict[str, Any] = await assets.bus.call_raw(c.IMPORT, payload, actor=who, timeout=timeout)
    return result


async def test_fifos_are_refused_at_once_and_another_scope_uploads_meanwhile(
    rooted: tuple[AssetsUnderTest, Path],
) -> None:
    assets, root = rooted
    attacker, other = actor(), actor()
    fifo = root / "report.pdf"
    os.mkfifo(fifo)
    os.symlink("report.pdf", root / "link.pdf")
    started = time.monotonic()
    imports = [
        asyncio.create_task(import_file(assets, attacker, "report.pdf" if i % 2 else "link.pdf"))
        for i in range(CONCURRENT)
    ]
    upload = asyncio.create_task(assets.upload(other, "fund-z", b"Fund Z holds bonds.\n", filename="z.txt"))
    _, pending = await asyncio.wait([*imports, upload], timeout=20)
    try:
        assert not pending, f"{len(pending)} requests hung (the imports, and the other scope's upload behind them)"
        assert time.monotonic() - started < 15
        assert upload.result()["status"] == "active"
        for task in imports:
            error = task.exception()
            assert isinstance(error, Invalid), error
            assert error.details == {"field": "path", "type": FIFO} and "FIFO" in error.message
        health = await assets.bus.health("assets")
        assert health is not None and health.status == "ok"
    finally:
        if pending:
            release_fifos([fifo])
            await asyncio.wait(pending, timeout=30)


async def test_devices_sockets_directories_and_links_out_are_refused(rooted: tuple[AssetsUnderTest, Path]) -> None:
    assets, root = rooted
    who = actor()
    os.symlink("/dev/zero", root / "zero.pdf")
    os.symlink("/dev/random", root / "random.txt")
    os.symlink("/dev", root / "dev")
    (root / "folder").mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(root / "sock"))
    for path in ["zero.pdf", "random.txt", "dev/zero", "dev/urandom", "folder/../dev/null"]:
        with pytest.raises(Invalid) as err:
            await import_file(assets, who, path, timeout=10)
        assert err.value.details == {"field": "path"} and "leaves the approved root" in err.value.message, path
    refused = {"folder": "a directory", "sock": "a socket"}
    try:
        # A device node inside the root itself (only root may make one): refused before a byte is read.
        os.mknod(root / "zero-node", stat.S_IFCHR | 0o600, os.makedev(1, 5))
        refused["zero-node"] = "a character device"
    except PermissionError:
        pass
    try:
        for path, what in refused.items():
            with pytest.raises(Invalid) as err:
                await import_file(assets, who, path, timeout=10)
            assert err.value.details == {"field": "path", "type": what}, path
    finally:
        listener.close()
    (root / "fine.txt").write_text("A regular file is still imported.\n")
    assert (await import_file(assets, who, "fine.txt"))["status"] == "active"


@pytest.fixture
async def narrow(
    make_settings: Callable[..., AssetsSettings], bus: BusClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[AssetsUnderTest, Path, threading.Event]]:
    """Three import threads, two per scope, one second each; any file named `stuck*` reads until released
    (what a hung network mount does, which no test can mount)."""
    root = tmp_path / "approved"
    root.mkdir()
    release = threading.Event()
    real_copy = acquisition.copy_bounded

    def copy(fd: int, out: int, *, max_bytes: int, deadline: float) -> tuple[str, int]:
        if Path(os.readlink(f"/proc/self/fd/{fd}")).name.startswith("stuck"):
            release.wait(60)
        return real_copy(fd, out, max_bytes=max_bytes, deadline=deadline)

    monkeypatch.setattr(acquisition, "copy_bounded", copy)
    settings = make_settings(
        DOSSIER_APPROVED_ROOTS=f"docs={root}",
        DOSSIER_IMPORT_THREADS="3",
        DOSSIER_IMPORT_THREADS_PER_SCOPE="2",
        DOSSIER_IMPORT_SECONDS="1",
    )
    try:
        async with running(create_app(settings)):
            yield AssetsUnderTest(settings, Blobs(settings), bus), root, release
    finally:
        release.set()


async def test_hung_reads_take_only_their_scopes_share_and_health_says_so(
    narrow: tuple[AssetsUnderTest, Path, threading.Event],
) -> None:
    assets, root, release = narrow
    attacker, other = actor(), actor()
    (root / "stuck.txt").write_text("never read\n")
    (root / "memo.txt").write_text("Fund W keeps a buffer.\n")
    stuck = [asyncio.create_task(import_file(assets, attacker, "stuck.txt")) for _ in range(3)]
    await probe_until(lambda: _health_reason(assets), timeout=10)
    # The attacker's scope holds its two threads; the other scope imports and uploads on what is left.
    fine = await import_file(assets, other, "memo.txt", timeout=10)
    assert fine["status"] == "active"
    async with asyncio.timeout(20):
        uploaded = await assets.upload(other, "up", b"Uploaded meanwhile.\n", filename="u.txt")
    assert uploaded["status"] == "active"
    errors = await asyncio.gather(*stuck, return_exceptions=True)
    assert all(isinstance(e, Timeout) for e in errors), errors
    messages = sorted(e.message for e in errors if isinstance(e, Timeout))
    assert messages == [
        "the file could not be read within 1 s",
        "the file could not be read within 1 s",
        "too many imports of this scope are under way; try again later",
    ]
    with pytest.raises(Timeout):  # its share stays taken while its reads hang
        await import_file(assets, attacker, "memo.txt")
    reason = await _health_reason(assets)
    assert reason is not None and "2 imports from approved roots did not finish within 1 s" in reason

    release.set()
    await probe_until(lambda: _health_ok(assets), timeout=10)
    assert (await import_file(assets, attacker, "memo.txt"))["status"] == "active"


async def _health_reason(assets: AssetsUnderTest) -> str | None:
    health = await assets.bus.health("assets")
    assert health is not None
    return health.reason if health.status == "degraded" else None


async def _health_ok(assets: AssetsUnderTest) -> bool:
    health = await assets.bus.health("assets")
    return health is not None and health.status == "ok"
