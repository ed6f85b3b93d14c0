"""The local supervisor as an operator sees it: a process that keeps dying is restarted after a doubling wait,
each restart is a JSON line in logs/supervisor.log and counted on the gateway's /metrics, and /v1/health
names the process once it was restarted more than five times in five minutes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from shared.restarts import SUPERVISOR_LOG
from tests.support.api import probe
from tests.support.observability import metrics_token
from tests.support.stack import RunningStack, stack_running

# A stack of its own, whose runhost it kills again and again: the local stack only.
pytestmark = pytest.mark.local_stack

BASE_DELAY = 0.2


@pytest.fixture(scope="module")
def crashing(dossier_homes: Callable[[str], Path]) -> Iterator[RunningStack]:
    # A short first wait, so six restarts take seconds; the doubling is the same from any base.
    with stack_running(dossier_homes("crash-loop"), extra_env={"DOSSIER_RESTART_DELAY": str(BASE_DELAY)}) as stack:
        yield stack


def restarts_of(stack: RunningStack, process: str) -> list[dict[str, object]]:
    path = stack.local_home() / SUPERVISOR_LOG
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [line for line in lines if line["process"] == process]


def crash_loop_reported(stack: RunningStack) -> dict[str, object] | None:
    r = httpx.get(f"{stack.url}/v1/health")
    body = r.json()
    return body if r.status_code == 503 and body["services"]["runhost"] == "degraded" else None


def test_a_crash_loop_backs_off_is_logged_counted_and_named_by_health(crashing: RunningStack) -> None:
    assert httpx.get(f"{crashing.url}/v1/health").status_code == 200
    scrape = {"Authorization": f"Bearer {metrics_token(crashing)}"}
    before = httpx.get(f"{crashing.url}/metrics", headers=scrape).text
    # Every supervised process is counted from the start, the servers included.
    for process in ("gateway", "runhost", "workspace", "postgres", "nats", "s3", "outside"):
        assert f'dossier_process_restarts_total{{process="{process}"}} 0.0' in before, process

    for n in range(1, 7):
        crashing.kill("runhost")  # returns once the supervisor has started it again: it dies young each time
        # The pid file names the new process only once its restart is on record.
        last = restarts_of(crashing, "runhost")[-1]
        assert (last["restarts"], last["new_pid"]) == (n, crashing.pid("runhost"))

    lines = restarts_of(crashing, "runhost")
    assert [line["delay_seconds"] for line in lines] == [BASE_DELAY * 2**n for n in range(6)]
    assert [line["restarts"] for line in lines] == [1, 2, 3, 4, 5, 6]
    assert {(line["reason"], line["exit_code"], line["service"], line["level"]) for line in lines} == {
        ("exited (-9)", -9, "supervisor", "warning")
    }
    # Each start waited its delay after the one before (the kill came only once the process was back).
    times = [datetime.fromisoformat(str(line["ts"])) for line in lines]
    for earlier, later, line in zip(times, times[1:], lines[1:], strict=False):
        assert (later - earlier).total_seconds() >= float(str(line["delay_seconds"])) - 0.01, line

    metrics = httpx.get(f"{crashing.url}/metrics", headers=scrape).text
    assert 'dossier_process_restarts_total{process="runhost"} 6.0' in metrics
    assert 'dossier_process_restarts_total{process="workspace"} 0.0' in metrics

    # runhost answers again between its deaths; health still says what happened, naming it.
    body = probe(lambda: crash_loop_reported(crashing), timeout=60)
    assert body["status"] == "degraded"
    assert body["reasons"]["runhost"] == "restarted 6 times in the last 5 minutes (see logs/supervisor.log)"
    assert {name: status for name, status in body["services"].items() if name != "runhost"} == dict.fromkeys(
        ("workspace", "publication", "artifact", "assets"), "ok"
    )
