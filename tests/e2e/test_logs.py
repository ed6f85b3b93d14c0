"""Logs a person can use, on a stack of the test's own: its two gateway workers write one `gateway.log`;
`dossier logs` finds a request by its id in the gateway's and its owner's lines, each carrying the trace,
whose every span carries the request id; with DOSSIER_TRACE_SQL=false a run's trace holds no SQL span;
`--follow` prints what is written after it started; and small log files rotate, keeping their backups."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.api import Api, gateway_client, probe
from tests.support.cli import cli_env, dossier
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.otlp import OtlpReceiver, ReceivedSpan, otlp_receiver
from tests.support.stack import ROOT, RunningStack, start_stack, stop_stack

pytestmark = pytest.mark.local_stack

MAX_BYTES = 65536
BACKUPS = 2
SQL_NAME = re.compile(r"[A-Z]+;?")


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def logged(dossier_homes: Callable[[str], Path], receiver: OtlpReceiver) -> Iterator[RunningStack]:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "DOSSIER_TRACE_SQL": "false",
        "DOSSIER_GATEWAY_WORKERS": "2",
        "DOSSIER_LOG_MAX_BYTES": str(MAX_BYTES),
        "DOSSIER_LOG_BACKUPS": str(BACKUPS),
    }
    running = start_stack(dossier_homes("logs"), extra_env=env)
    try:
        yield running
    finally:
        stop_stack(running.proc)  # type: ignore[arg-type]


def home_env(stack: RunningStack) -> dict[str, str]:
    return cli_env(None, None, DOSSIER_HOME=str(stack.local_home()))


def logs(stack: RunningStack, *args: str) -> subprocess.CompletedProcess[str]:
    done = dossier(None, None, "logs", *args, env=home_env(stack))
    assert done.returncode == 0, done.stderr
    return done


def json_lines(stack: RunningStack, *args: str) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in logs(stack, "--json", *args).stdout.splitlines()]


def test_both_gateway_workers_write_one_gateway_log(logged: RunningStack) -> None:
    token = logged.token("logs-workers")
    request_id = f"req_logs_{uuid.uuid4().hex}"

    def both_served() -> bool:
        for _ in range(10):
            # A connection per request: the kernel hands each to either worker.
            headers = {"Authorization": f"Bearer {token}", "X-Request-ID": request_id, "Connection": "close"}
            assert httpx.get(f"{logged.url}/v1/workspaces", headers=headers).status_code == 200
        lines = json_lines(logged, "--request-id", request_id, "--process", "gateway")
        return {line["process"] for line in lines} == {"gateway", "gateway-w2"}

    probe(both_served, timeout=60)
    names = {path.name for path in (logged.local_home() / "logs").iterdir()}
    assert "gateway.log" in names and not [name for name in names if name.startswith("gateway-w")]
    # One line per request, in the file of its kind: the workers' lines are whole and none is doubled.
    text = "".join((logged.local_home() / "logs" / name).read_text() for name in names if name.startswith("gateway"))
    mine = [json.loads(raw) for raw in text.split("\n") if request_id in raw]
    assert len(mine) == len({(line["ts"], line["process"], line["msg"]) for line in mine}) > 0


def spans_of(receiver: OtlpReceiver, trace_id: str) -> list[ReceivedSpan]:
    return [span for span in receiver.spans() if span.trace_id == trace_id]


def test_a_request_is_found_by_its_id_in_the_gateway_and_its_owner_with_its_trace(
    logged: RunningStack, receiver: OtlpReceiver
) -> None:
    api = Api(logged)
    request_id = f"req_logs_{uuid.uuid4().hex}"
    r = api.http.post("/v1/workspaces", json={"title": "Logs", "goal": "g"}, headers={"X-Request-ID": request_id})
    assert r.status_code == 201, r.text

    def found() -> list[dict[str, Any]] | None:
        lines = json_lines(logged, "--request-id", request_id)
        return lines if {"gateway", "workspace"} <= {line["service"] for line in lines} else None

    lines = probe(found, timeout=20)
    assert {line["request_id"] for line in lines} == {request_id}
    # Every line of the request names the trace it was written in: the request's one.
    assert all(line.get("trace_id") for line in lines), lines
    trace_ids = {line["trace_id"] for line in lines}
    assert len(trace_ids) == 1, lines

    # The readable form: time, process, level, request id, message.
    printed = logs(logged, "--request-id", request_id).stdout.splitlines()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}"
    assert any(re.match(rf"{stamp}  gateway(-w2)?\s+info\s+{request_id}  POST /v1/workspaces 201", p) for p in printed)
    assert any(
        re.match(rf"{stamp}  workspace\s+info\s+{request_id}  dossier\.workspace\.create ok", p) for p in printed
    )

    # Every span of its trace carries the request id, the ones opened before the id was known included.
    (trace_id,) = trace_ids
    wanted = {("dossier-gateway", "POST /v1/workspaces"), ("dossier-workspace", "dossier.workspace.create process")}
    spans = probe(lambda: (s := spans_of(receiver, trace_id)) and wanted <= {(x.service, x.name) for x in s} and s)
    assert {span.attributes.get("dossier.request_id") for span in spans} == {request_id}, spans


def test_with_sql_tracing_off_a_runs_trace_holds_no_sql_span(logged: RunningStack, receiver: OtlpReceiver) -> None:
    api = Api(logged)
    ws = api.workspace()
    api.upload(pdf(ANNOUNCEMENT), f"announcement-{uuid.uuid4().hex[:6]}", "announcement.pdf", ws["id"])
    api.wait_catalog(ws["id"], 1)
    run = api.start_run(ws["id"], "Are redemptions of Fund X gated or suspended?")
    assert api.wait_run(run["id"])["status"] == "completed"

    def attempt_of_run() -> ReceivedSpan | None:
        runs = (s for s in receiver.spans() if s.name == "run attempt" and s.attributes["dossier.run_id"] == run["id"])
        return next(runs, None)

    attempt = probe(attempt_of_run, timeout=30)
    done = ("dossier-runhost", "dossier.evt.run.completed publish")
    spans = probe(
        lambda: (s := spans_of(receiver, attempt.trace_id)) and done in {(x.service, x.name) for x in s} and s
    )
    assert {span.service.removeprefix("dossier-") for span in spans} >= {"gateway", "runhost", "workspace"}
    sql = [span.name for span in spans if "db.system" in span.attributes or SQL_NAME.fullmatch(span.name)]
    assert sql == []
    # The run's own request id, `<run>.e<epoch>`, is on its attempt.
    epoch = attempt.attributes["dossier.lease_epoch"]
    assert attempt.attributes["dossier.request_id"] == f"{run['id']}.e{epoch}"


def test_follow_prints_a_line_written_after_it_started(logged: RunningStack) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "dossier_cli", "logs", "--follow", "--process", "gateway", "--tail", "1"],
        cwd=ROOT,
        env=home_env(logged),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    printed: list[str] = []
    threading.Thread(target=lambda: printed.extend(proc.stdout or ()), daemon=True).start()
    try:
        probe(lambda: printed, timeout=30)  # what was there: read, and the last line printed
        request_id = f"req_follow_{uuid.uuid4().hex}"
        Api(logged).http.get("/v1/workspaces", headers={"X-Request-ID": request_id})
        probe(lambda: any(request_id in line for line in printed), timeout=30)
    finally:
        proc.kill()
        proc.wait(10)


def test_small_log_files_rotate_and_keep_their_backups(logged: RunningStack) -> None:
    folder = logged.local_home() / "logs"
    token = logged.token("logs-rotation")
    client = gateway_client(base_url=logged.url, headers={"Authorization": f"Bearer {token}"})

    def rotated_twice() -> bool:
        for _ in range(100):
            assert client.get("/v1/workspaces").status_code == 200
        return (folder / f"gateway.log.{BACKUPS}").exists()

    # A second rotation means the workers wrote on into the new file of that name after the first.
    probe(rotated_twice, timeout=120)
    assert not (folder / f"gateway.log.{BACKUPS + 1}").exists()
    # A file is rotated only once full.
    assert all((folder / f"gateway.log.{n}").stat().st_size >= MAX_BYTES for n in range(1, BACKUPS + 1))
    request_id = f"req_rotated_{uuid.uuid4().hex}"
    client.get("/v1/workspaces", headers={"X-Request-ID": request_id})

    # The owner's line may come first (the gateway writes its line once it has answered): the gateway's is there.
    def gateway_line() -> dict[str, Any] | None:
        found = [
            line for line in json_lines(logged, "--request-id", request_id) if line["process"].startswith("gateway")
        ]
        return found[0] if found else None

    line = probe(gateway_line, timeout=20)
    assert line["process"] in ("gateway", "gateway-w2")
