"""A stack started from under a private folder (mode 0700, as `mktemp -d` and Debian's /root make them)
comes up, and leaves every folder outside its home as it found it.

As root, Postgres runs as a system user, which may traverse neither that folder nor the ones above the
virtual environment: it reaches its data and binaries through a view of its own (devstack/pgview.py).
"""

from __future__ import annotations

import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devstack.infra import pg_bin
from tests.support.stack import start_stack, stop_stack

# It runs on a stack of its own: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack


def ancestors(path: Path) -> Iterator[Path]:
    yield from path.resolve().parents


def modes(paths: set[Path]) -> dict[Path, str]:
    return {p: stat.filemode(p.stat().st_mode) for p in sorted(paths)}


def test_a_stack_under_a_private_folder_is_healthy_and_changes_no_folder_outside_its_home() -> None:
    parent = Path(tempfile.mkdtemp(prefix="dossier-private-"))
    try:
        parent.chmod(0o700)
        project = parent / "project"
        project.mkdir(mode=0o700)
        home = project / ".dossier"
        outside = {*ancestors(home), *ancestors(pg_bin()), *ancestors(Path(sys.prefix))}
        outside = {p for p in outside if not p.is_relative_to(home)}
        before = modes(outside)
        stack = start_stack(home)
        try:
            assert httpx.get(f"{stack.url}/v1/health").status_code == 200
            auth = {"Authorization": f"Bearer {stack.token('private-parent')}"}
            made = httpx.post(f"{stack.url}/v1/publications", json={"title": "kept", "body": "stored"}, headers=auth)
            assert made.status_code == 201, made.text
            read = httpx.get(f"{stack.url}/v1/publications/{made.json()['id']}/versions/1", headers=auth)
            assert read.json()["body"] == "stored"
        finally:
            stop_stack(stack.proc)
        assert modes(outside) == before
        assert stat.S_IMODE(parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
    finally:
        shutil.rmtree(parent, ignore_errors=True)
