"""NATS gone for three minutes, then back: every process reconnects by itself and work flows again.

Its own stack (the supervisor holds NATS down for 180 s after it dies, and restarts a deaf service
after 10 s), so no other test sees the outage. Wall time is about four minutes.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import httpx
import pytest

from shared.contracts.common import ALL_PROCESSES
from tests.support.api import Api, probe
from tests.support.stack import RunningStack, start_stack, stop_stack

# It runs on a stack of its own, whose NATS it stops: the local stack only (make test-containers deselects it).
# Its three minutes are spent waiting: make test runs it beside the rest.
pytestmark = [pytest.mark.local_stack, pytest.mark.waits]

OUTAGE_SECONDS = 180


@pytest.fixture(scope="module")
def outage_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    env = {"DOSSIER_NATS_RESTART_DELAY": str(OUTAGE_SECONDS), "DOSSIER_UNHEALTHY_RESTART_SECONDS": "10"}
    running = start_stack(tmp_path_factory.mktemp("outage-home"), extra_env=env)
    try:
        yield running
    finally:
        stop_stack(running.proc)


def health_status(stack: RunningStack) -> int:
    try:
        return httpx.get(f"{stack.url}/v1/health", timeout=10).status_code
    except httpx.HTTPError:
        return 0


def reports_bad(stack: RunningStack, name: str) -> bool:
    path = stack.home / "health" / f"{name}.json"
    return path.exists() and '"ok": false' in path.read_text()


def some_work_flows(api: Api) -> None:
    ws = api.workspace()
    api.publish("Fund X liquidity report", "Fund X liquidity is adequate after the outage.", ws["id"])
    api.wait_catalog(ws["id"], 1, timeout=60)
    run = api.wait_run(api.start_run(ws["id"], "What does the report conclude?")["id"], timeout=120)
    assert run["status"] == "completed", run["error"]


@pytest.mark.timeout(OUTAGE_SECONDS + 240)
def test_nats_down_for_three_minutes_then_back_and_work_flows(outage_stack: RunningStack) -> None:
    api = Api(outage_stack)
    some_work_flows(api)
    pids = {name: outage_stack.pid(name) for name in ALL_PROCESSES}
    nats_pid = outage_stack.pid("nats")

    os.kill(nats_pid, signal.SIGKILL)
    # Every process notices and says so in its health report; the gateway answers degraded, never hangs.
    for name in ALL_PROCESSES:
        probe(lambda name=name: reports_bad(outage_stack, name), timeout=60)
    assert health_status(outage_stack) == 503
    # Held down by the supervisor for the outage, then started again.
    probe(lambda: outage_stack.pid("nats") != nats_pid, timeout=OUTAGE_SECONDS + 60, interval=1)

    probe(lambda: health_status(outage_stack) == 200, timeout=60)
    some_work_flows(api)
    after = {name: outage_stack.pid(name) for name in ALL_PROCESSES}
    assert after == pids, "every process reconnected by itself; none had to be restarted"


def test_a_service_whose_health_stays_bad_is_restarted(outage_stack: RunningStack) -> None:
    api = Api(outage_stack)
    victim = outage_stack.pid("publication")
    os.kill(victim, signal.SIGSTOP)  # alive but deaf: its health report stops changing
    try:
        probe(lambda: outage_stack.pid("publication") != victim, timeout=60)
    finally:
        try:
            os.kill(victim, signal.SIGCONT)
        except ProcessLookupError:
            pass
    probe(lambda: health_status(outage_stack) == 200, timeout=60)
    ws = api.workspace()
    api.publish("After the restart", "The publication service answers again.", ws["id"])
    api.wait_catalog(ws["id"], 1, timeout=60)
    assert "publication is unhealthy" in outage_stack.output.read_text()
