"""deploy/observability/ against real stacks: every process the stack lists answers the scrapers' metrics token
(the gateway's included) and passes `promtool check metrics`; together they export, before any traffic,
every series an alert rule or a dashboard query names; a real Prometheus with prometheus.yml finds every
process at the ports the stack chose, and follows one that moves."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devstack.procs import can_listen, free_port
from devstack.scrape import TARGETS_FILE
from shared.restarts import SUPERVISOR_LOG
from tests.support.api import probe
from tests.support.observability import (
    OBSERVABILITY,
    PROMETHEUS,
    metrics_token,
    named_series,
    promtool,
    rules_and_queries,
    sample_names,
    scrape,
)
from tests.support.stack import RunningStack, start_stack, stop_stack

# Stacks of its own: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack


def discovered(stack: RunningStack) -> dict[str, str]:
    """Process → /metrics URL, as the targets file written for Prometheus's file-based discovery says."""
    groups = json.loads((stack.local_home() / TARGETS_FILE).read_text())
    return {group["labels"]["process"]: f"http://{group['targets'][0]}/metrics" for group in groups}


def missing_series(stack: RunningStack, named: set[str]) -> set[str]:
    """What the rules and dashboards name that no process of the stack exports a sample of (yet)."""
    token = metrics_token(stack)
    exported: set[str] = set()
    for url in discovered(stack).values():
        exported |= sample_names(scrape(url, token) or "")
    return named - exported


def check_every_target(stack: RunningStack) -> None:
    urls = discovered(stack)
    assert urls == stack.state()["metrics"]
    token = metrics_token(stack)
    for process, url in urls.items():
        service = process.partition(".")[0]
        text = probe(partial(scrape, url, token), timeout=30)
        assert "dossier_bus_calls_total" in text, process
        # Runs are runhost's figure: no other process exports the family.
        assert ("# TYPE dossier_runs gauge" in text) == (service == "runhost"), process
        assert ("dossier_extraction_waiting 0.0" in text) == (service == "assets"), process
        result = promtool("check", "metrics", input_text=text)
        assert result.returncode == 0, (process, result.stdout + result.stderr)
    # Every series a rule or a panel names, counters at 0 before their first event; the gauges that are
    # measured on a period (runs, consumer backlog, the dead-letter stream) within their first period.
    named = {name for _, expr in rules_and_queries() for name in named_series(expr)}
    probe(lambda: not missing_series(stack, named), timeout=60)


def test_every_process_exports_what_the_rules_name_from_the_start_across_two_restarts(
    dossier_homes: Callable[[str], Path],
) -> None:
    home = dossier_homes("prometheus")
    for _ in range(3):  # the first start and two restarts, on one home
        stack = start_stack(home)
        try:
            check_every_target(stack)
        finally:
            stop_stack(stack.proc)


@contextmanager
def prometheus(stack: RunningStack, work: Path) -> Iterator[str]:
    """Prometheus with deploy/observability's config, its two files linked beside it from the stack's home as
    docs/operations.md says; scraping every second, so the test waits less. Stopped when the block ends."""
    config = yaml.safe_load((OBSERVABILITY / "prometheus.yml").read_text())
    config["global"] |= {"scrape_interval": "1s", "evaluation_interval": "1s"}
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    shutil.copy(OBSERVABILITY / "alerts.yml", work / "alerts.yml")
    for name in ("metrics-token", TARGETS_FILE):
        (work / name).symlink_to(stack.local_home() / name)
    port = free_port()
    argv = [PROMETHEUS, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}"]
    argv += [f"--web.listen-address=127.0.0.1:{port}"]
    with open(work / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def targets_up(api: str) -> dict[str, dict[str, Any]]:
    """Process → its active target, once Prometheus has scraped it successfully."""
    try:
        active = httpx.get(f"{api}/api/v1/targets").json()["data"]["activeTargets"]
    except (httpx.TransportError, ValueError):
        return {}
    return {t["labels"]["process"]: t for t in active if t["health"] == "up"}


def all_up(api: str, processes: set[str]) -> dict[str, dict[str, Any]] | None:
    found = targets_up(api)
    return found if set(found) == processes else None


def moved(stack: RunningStack, process: str, old: str) -> str | None:
    """The process's /metrics URL in stack.json once it is no longer `old`."""
    urls = stack.state()["metrics"]
    assert isinstance(urls, dict)
    return None if urls[process] == old else str(urls[process])


def query(api: str, promql: str) -> list[dict[str, Any]]:
    try:
        result = httpx.get(f"{api}/api/v1/query", params={"query": promql}).json()["data"]["result"]
    except (httpx.TransportError, ValueError, KeyError):
        return []
    return list(result)


def test_prometheus_finds_every_process_at_the_ports_the_stack_chose_and_follows_one_that_moves(
    dossier_homes: Callable[[str], Path], tmp_path: Path
) -> None:
    stack = start_stack(dossier_homes("prometheus-sd"))
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    supervisor = stack.state()["supervisor_pid"]
    assert isinstance(supervisor, int)
    try:
        with prometheus(stack, tmp_path) as api:
            urls = stack.state()["metrics"]
            assert isinstance(urls, dict)
            up = probe(lambda: all_up(api, set(urls)), timeout=60)
            for process, target in up.items():
                assert target["scrapeUrl"] == urls[process], process
                assert target["labels"]["service"] == process.partition(".")[0], process

            # runhost's metrics port taken while it is down (the supervisor held still, so the test's bind
            # comes first): the supervisor starts it on another port, and Prometheus follows.
            old = urls["runhost"]
            old_port = int(old.rsplit(":", 1)[1].split("/")[0])
            os.kill(supervisor, signal.SIGSTOP)
            try:
                victim = stack.pid("runhost")
                os.kill(victim, signal.SIGKILL)
                # Its socket closes as it dies (it stays a zombie until the supervisor, held still, reaps it).
                probe(lambda: can_listen(old_port), timeout=30)
                squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the scrapes' TIME_WAIT
                squatter.bind(("127.0.0.1", old_port))
                squatter.listen()
            finally:
                os.kill(supervisor, signal.SIGCONT)
            new = probe(lambda: moved(stack, "runhost", old), timeout=30)
            assert discovered(stack)["runhost"] == new
            probe(lambda: targets_up(api).get("runhost", {}).get("scrapeUrl") == new, timeout=60)
            line = json.loads((stack.local_home() / SUPERVISOR_LOG).read_text().splitlines()[-1])
            assert (line["process"], line["metrics_port_taken"]) == ("runhost", old_port)

            # The gateway exports the restart with the restarted process's own label (honor_labels).
            counted = probe(lambda: query(api, 'dossier_process_restarts_total{process="runhost"} > 0'), timeout=60)
            assert [(s["metric"]["service"], s["value"][1]) for s in counted] == [("gateway", "1")]
            rules = httpx.get(f"{api}/api/v1/rules").json()["data"]["groups"]
            assert "DossierCrashLoop" in {rule["name"] for group in rules for rule in group["rules"]}
    finally:
        squatter.close()
        stop_stack(stack.proc)
