"""Hostile files through the gateway on the whole stack: a FIFO planted in an approved root, and a new
version that extracts nothing. Neither takes anything from another scope or from the version in use."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import httpx
import pytest

from tests.support import documents
from tests.support.api import Api, error_of, probe
from tests.support.stack import RunningStack

# More than the six threads of the default executor on two cores, and than the import threads.
CONCURRENT = 12


@pytest.fixture
def fifo(stack: RunningStack) -> Iterator[Path]:
    """A FIFO in the shared root and a link to it."""
    docs = stack.approved_roots["docs"]
    path = docs / f"fifo-{uuid.uuid4().hex[:8]}.pdf"
    os.mkfifo(path)
    os.symlink(path.name, docs / f"link-{path.name}")
    yield path


def release(path: Path, seconds: float = 60.0) -> None:
    """Opens and closes the FIFO as a writer, again and again, on a daemon thread: imports blocked in their
    open (the code before the fix) get their end of file, and the stack every e2e test shares lives on."""

    def cycle() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
            time.sleep(0.02)
            os.close(fd)

    threading.Thread(target=cycle, daemon=True).start()


def test_a_fifo_in_the_root_is_refused_at_once_and_others_upload_meanwhile(stack: RunningStack, fifo: Path) -> None:
    attacker, other = Api(stack), Api(stack)
    paths = [fifo.name if i % 2 else f"link-{fifo.name}" for i in range(CONCURRENT)]
    started = time.monotonic()
    pool = ThreadPoolExecutor(CONCURRENT + 1)
    try:
        imports = [
            pool.submit(attacker.http.post, "/v1/assets/import", json={"root": "docs", "path": p, "source_id": "pipe"})
            for p in paths
        ]
        upload = pool.submit(
            other.http.post, "/v1/assets", data={"source_id": "fund-v"}, files={"file": ("v.txt", b"Fund V.\n")}
        )
        _, pending = wait([*imports, upload], timeout=20)
        if pending:
            release(fifo)
        assert not pending, f"{len(pending)} requests hung (the imports, and the other scope's upload behind them)"
    finally:
        pool.shutdown(wait=True)
    assert time.monotonic() - started < 15
    assert upload.result().status_code == 201 and upload.result().json()["status"] == "active"
    for reply in (f.result() for f in imports):
        assert reply.status_code == 422, reply.text
        assert error_of(reply)["details"] == {"field": "path", "type": "a FIFO (named pipe)"}
    health = httpx.get(f"{stack.url}/v1/health")
    assert health.status_code == 200 and health.json()["services"]["assets"] == "ok", health.text


def test_a_version_that_extracts_nothing_leaves_v1_in_the_catalog(stack: RunningStack) -> None:
    api = Api(stack)
    ws = api.workspace()
    v1 = api.ok(
        "POST",
        "/v1/assets",
        data={"source_id": "memo", "workspace_id": ws["id"]},
        files={"file": ("memo.pdf", documents.pdf(["Fund U keeps ten percent in cash."]))},
    )
    assert v1["status"] == "active"
    for hostile in (documents.blank_pdf(4), documents.nested_flate_pdf()):
        r = api.http.post("/v1/assets", data={"source_id": "memo"}, files={"file": ("memo.pdf", hostile)})
        assert r.status_code == 201 and r.json()["status"] == "failed", r.text
        assert r.json()["error"] == "nothing was extracted (no passage); version 1 stays active"
    source = api.ok("GET", "/v1/sources/memo")
    assert source["active_version"] == 1
    assert [(v["version"], v["status"]) for v in source["versions"]] == [(1, "active"), (2, "failed"), (3, "failed")]

    # The workspace handles events in order: once a later association shows, the failures have been seen.
    api.ok("POST", "/v1/assets", data={"source_id": "later", "workspace_id": ws["id"]}, files={"file": ("l.txt", b"x")})
    catalog = probe(lambda: _sources(api, ws["id"]) if len(_sources(api, ws["id"])) == 2 else None)
    assert catalog["memo"] == (1, True, None)
    assert api.ok("GET", f"/v1/workspaces/{ws['id']}/drift")["items"] == []


def _sources(api: Api, workspace_id: str) -> dict[str, tuple[int | None, bool, str | None]]:
    items = api.ok("GET", f"/v1/workspaces/{workspace_id}/catalog")["items"]
    return {i["id"]: (i["version"], i["available"], i["reason"]) for i in items if i["kind"] == "source"}
