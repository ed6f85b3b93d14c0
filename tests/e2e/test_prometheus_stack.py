"""deploy/observability/prometheus.yml against real stacks: every target it names answers with its token and
passes `promtool check metrics`, on the same ports after a restart; a fixed port already held stops the start."""

from __future__ import annotations

import socket
from collections.abc import Callable
from functools import partial
from pathlib import Path

import httpx
import pytest

from devstack.procs import free_port, free_port_range
from tests.support.api import probe
from tests.support.observability import Target, promtool, scrape_targets, stack_port
from tests.support.stack import METRICS_PORTS, RunningStack, start_stack, stop_stack

# Stacks of its own: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack


def scrape(stack: RunningStack, target: Target, port: int) -> str | None:
    """The exposition a Prometheus with this config reads, with the token its credentials_file holds."""
    token = (stack.home / target.credentials_file).read_text().strip()
    try:
        r = httpx.get(f"http://{target.host}:{port}/metrics", headers={"Authorization": f"Bearer {token}"})
    except httpx.TransportError:
        return None
    assert r.status_code == 200, (target, r.status_code, r.text[:300])
    return r.text


def backlog_measured(stack: RunningStack, target: Target, port: int) -> bool:
    text = scrape(stack, target, port) or ""
    return "dossier_consumer_pending_events{consumer=" in text and "dossier_dead_letter_events " in text


def check_every_target(stack: RunningStack, http_port: int, metrics_base: int) -> None:
    targets = scrape_targets()
    rendered = {t.process: f"http://{t.host}:{stack_port(t, http_port, metrics_base)}/metrics" for t in targets}
    assert rendered == stack.state()["metrics"]
    for target in targets:
        port = stack_port(target, http_port, metrics_base)
        text = probe(partial(scrape, stack, target, port), timeout=30)
        assert "dossier_bus_calls_total" in text, target
        # Runs are runhost's figure: no other process exports the family.
        assert ("# TYPE dossier_runs gauge" in text) == (target.service == "runhost"), target
        assert ("dossier_extraction_waiting 0.0" in text) == (target.service == "assets"), target
        result = promtool("check", "metrics", input_text=text)
        assert result.returncode == 0, (target.process, result.stdout + result.stderr)
    # The event consumer (workspace) reads its backlog and the dead-letter stream's depth once it runs.
    workspace = next(t for t in targets if t.process == "workspace")
    probe(partial(backlog_measured, stack, workspace, stack_port(workspace, http_port, metrics_base)), timeout=30)


def test_one_scrape_config_reaches_every_process_across_two_restarts(dossier_homes: Callable[[str], Path]) -> None:
    home = dossier_homes("prometheus")
    http_port, metrics_base = free_port(), free_port_range(METRICS_PORTS)
    ports = {"DOSSIER_HTTP_PORT": str(http_port), "DOSSIER_METRICS_BASE_PORT": str(metrics_base)}
    for _ in range(3):  # the first start and two restarts, on one home and one config
        stack = start_stack(home, extra_env=ports)
        try:
            check_every_target(stack, http_port, metrics_base)
        finally:
            stop_stack(stack.proc)


def test_a_metrics_port_already_held_fails_the_start_at_once(dossier_homes: Callable[[str], Path]) -> None:
    metrics_base = free_port_range(METRICS_PORTS)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", metrics_base + 1))  # runhost's port
        squatter.listen()
        with pytest.raises(RuntimeError, match=rf"metrics ports already in use: runhost {metrics_base + 1}"):
            start_stack(dossier_homes("metrics-squatted"), extra_env={"DOSSIER_METRICS_BASE_PORT": str(metrics_base)})
