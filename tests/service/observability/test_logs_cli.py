"""`dossier logs` on a folder of log files as the stack leaves them: every file and backup merged in time
order, the filters, the readable and JSON forms, and `--follow` across a rotation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.api import probe
from tests.support.stack import ROOT


def line(ts: str, process: str, msg: str, request_id: str | None = None, **more: object) -> str:
    fields = {"ts": ts, "service": process.split("-")[0].split(".")[0], "level": "info", "msg": msg}
    fields |= {"process": process, "logger": "dossier.test", **({"request_id": request_id} if request_id else {})}
    return json.dumps(fields | more) + "\n"


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")} | {"DOSSIER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "dossier_cli", "logs", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_dossier_logs_merges_every_file_and_backup_in_time_order_and_filters(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "gateway.log.1").write_text(
        line("2026-11-30T10:00:01.000+00:00", "gateway", "GET /v1/workspaces 200 1.0ms", "req_a")
        # A worker that had not yet moved when the file was rotated: later than the first line of the new one.
        + line("2026-11-30T10:00:04.000+00:00", "gateway-w2", "GET /v1/runs 200 1.0ms", "req_c")
    )
    (logs / "gateway.log").write_text(
        line("2026-11-30T10:00:03.000+00:00", "gateway-w2", "POST /v1/workspaces 201 3.0ms", "req_b")
    )
    (logs / "workspace.log").write_text(
        line("2026-11-30T10:00:01.500+00:00", "workspace", "dossier.workspace.list ok", "req_a")
        + line("2026-11-30T10:00:03.500+00:00", "workspace.2", "failed", "req_b", level="error", error="Trace\n  boom")
    )
    (logs / "postgres.log").write_text("2026-11-30 10:00:02.000 UTC [12] LOG:  checkpoint starting: time\n  detail\n")
    # A worker's own file, as an earlier release wrote it (no `process`, only `worker`).
    legacy = {"ts": "2026-11-30T10:00:00.500+00:00", "service": "gateway", "level": "info", "worker": 2}
    (logs / "gateway-w2.log").write_text(json.dumps(legacy | {"msg": "GET /v1/health 200 0.5ms"}) + "\n")

    done = cli(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == [
        "2026-11-30 10:00:00.500  gateway-w2   info    -  GET /v1/health 200 0.5ms",
        "2026-11-30 10:00:01.000  gateway      info    req_a  GET /v1/workspaces 200 1.0ms",
        "2026-11-30 10:00:01.500  workspace    info    req_a  dossier.workspace.list ok",
        "2026-11-30 10:00:02.000  postgres     -       -  2026-11-30 10:00:02.000 UTC [12] LOG:  checkpoint starting: time",
        "2026-11-30 10:00:02.000  postgres     -       -    detail",
        "2026-11-30 10:00:03.000  gateway-w2   info    req_b  POST /v1/workspaces 201 3.0ms",
        "2026-11-30 10:00:03.500  workspace.2  error   req_b  failed",
        "    Trace",
        "      boom",
        "2026-11-30 10:00:04.000  gateway-w2   info    req_c  GET /v1/runs 200 1.0ms",
        "",
    ]

    by_request = cli(tmp_path, "--request-id", "req_b", "--json")
    assert [json.loads(raw)["process"] for raw in by_request.stdout.splitlines()] == ["gateway-w2", "workspace.2"]
    one_worker = cli(tmp_path, "--process", "gateway-w2", "--process", "postgres", "--json")
    assert [json.loads(raw).get("process", "legacy") for raw in one_worker.stdout.splitlines()] == [
        "legacy",
        "postgres",
        "postgres",
        "gateway-w2",
        "gateway-w2",
    ]
    assert cli(tmp_path, "--tail", "1").stdout.startswith("2026-11-30 10:00:04.000  gateway-w2")

    unknown = cli(tmp_path, "--process", "mailer")
    assert unknown.returncode == 2 and "there are: gateway, gateway-w2, postgres, workspace" in unknown.stderr
    assert cli(tmp_path / "nowhere").returncode == 2


def test_dossier_logs_follow_prints_lines_written_after_it_started_across_a_rotation(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    current = logs / "gateway.log"
    current.write_text(line("2026-11-30T10:00:00.000+00:00", "gateway", "before"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOSSIER_")} | {"DOSSIER_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "dossier_cli", "logs", "--follow", "--process", "gateway"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    printed: list[str] = []
    reader = threading.Thread(target=lambda: printed.extend(proc.stdout or ()), daemon=True)
    reader.start()
    try:
        probe(lambda: any("before" in p for p in printed), timeout=30)
        with open(current, "a") as f:
            f.write(line("2026-11-30T10:00:01.000+00:00", "gateway", "after"))
        probe(lambda: any("after" in p for p in printed), timeout=30)
        # Rotated: one worker writes to the new file, another that has not yet moved to the renamed one.
        os.replace(current, logs / "gateway.log.1")
        current.write_text(line("2026-11-30T10:00:02.500+00:00", "gateway", "first in the new file"))
        probe(lambda: any("first in the new file" in p for p in printed), timeout=30)
        with open(logs / "gateway.log.1", "a") as f:
            f.write(line("2026-11-30T10:00:02.000+00:00", "gateway-w2", "late in the old file"))
        probe(lambda: any("late in the old file" in p for p in printed), timeout=30)
        assert [p.split("  ")[-1].strip() for p in printed] == [
            "before",
            "after",
            "first in the new file",
            "late in the old file",
        ]
    finally:
        proc.kill()
        proc.wait(10)
