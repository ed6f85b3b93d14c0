"""`dossier ingest` as a real subprocess against the whole stack."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from tests.support import documents
from tests.support.cli import dossier, no_traceback
from tests.support.stack import RunningStack


def test_ingest_several_files_one_failing(stack: RunningStack, tmp_path: Path) -> None:
    token = stack.token(f"s{uuid.uuid4().hex[:8]}")
    (tmp_path / "report.pdf").write_bytes(documents.pdf(["Quarterly liquidity report."]))
    (tmp_path / "notes.txt").write_text("Call with the manager.\n\nGates are unlikely.\n")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.6\n" + documents.random_bytes(800))
    (tmp_path / "blob.bin").write_bytes(documents.random_bytes())
    files = [str(tmp_path / n) for n in ("report.pdf", "broken.pdf", "blob.bin", "notes.txt", "missing.pdf")]

    done = dossier(stack, token, "ingest", *files, "--source-id-from-name", "--workspace", "ws_cli")
    # The rest go up, and the missing file makes it a usage error (README: an unreadable local file is 2).
    assert done.returncode == 2, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].split() == ["FILE", "SOURCE", "VERSION", "STATUS", "COVERAGE"]
    by_file = {Path(line.split()[0]).name: line for line in lines[1:]}
    assert by_file["report.pdf"].split()[2:5] == ["1", "active", "complete"]
    assert by_file["notes.txt"].split()[2:5] == ["1", "active", "complete"]
    assert "failed" in by_file["broken.pdf"]
    assert "unsupported" in by_file["blob.bin"] and "error" in by_file["blob.bin"]
    assert "cannot read" in by_file["missing.pdf"]
    assert "5/5" in done.stderr and "3 of 5 files failed" in done.stderr  # the progress bar, then the summary
    assert f"cannot read {files[-1]}" in done.stderr

    auth = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{stack.url}/v1/sources/report.pdf", headers=auth).json()["active_version"] == 1

    again = dossier(stack, token, "ingest", files[0], "--source-id", "report.pdf")
    assert again.returncode == 0, again.stderr
    assert "active (reused)" in again.stdout and "[" not in again.stderr  # one file: no progress bar


def test_a_missing_file_alone_is_a_usage_error(stack: RunningStack, tmp_path: Path) -> None:
    token = stack.token(f"s{uuid.uuid4().hex[:8]}")
    done = dossier(stack, token, "ingest", str(tmp_path / "missing.pdf"), "--source-id", "missing")
    assert done.returncode == 2 and no_traceback(done), done.stderr
    assert f"cannot read {tmp_path / 'missing.pdf'}" in done.stderr
