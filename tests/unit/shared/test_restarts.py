"""The supervisor's backoff and record of restarts, and what the gateway reads from it (shared/restarts.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from shared.restarts import (
    MAX_BACKOFF_SECONDS,
    RESTARTS_FILE,
    SUPERVISOR_LOG,
    RestartBook,
    RestartsCollector,
    next_delay,
    read_restarts,
)


def test_the_wait_doubles_while_a_process_keeps_dying_up_to_thirty_seconds() -> None:
    delay, waits = None, []
    for _ in range(9):
        delay = next_delay(delay, 0.5, uptime=1.0)
        waits.append(delay)
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_a_process_that_ran_longer_than_the_longest_wait_starts_again_at_the_base() -> None:
    assert next_delay(16.0, 0.5, uptime=MAX_BACKOFF_SECONDS) == 0.5
    assert next_delay(16.0, 0.5, uptime=MAX_BACKOFF_SECONDS - 1) == 30.0


def test_a_base_above_the_cap_is_kept() -> None:
    """Fault tests hold NATS down with a long first wait (DOSSIER_NATS_RESTART_DELAY); the cap never shortens it."""
    assert next_delay(None, 180.0, uptime=1.0) == 180.0
    assert next_delay(180.0, 180.0, uptime=1.0) == 180.0


def test_every_process_is_counted_at_zero_from_the_start(tmp_path: Path) -> None:
    book = RestartBook(tmp_path, ["gateway", "runhost", "postgres"])
    try:
        assert read_restarts(tmp_path / RESTARTS_FILE).counts == {"gateway": 0, "runhost": 0, "postgres": 0}
        registry = CollectorRegistry()
        registry.register(RestartsCollector(tmp_path / RESTARTS_FILE))
        text = generate_latest(registry).decode()
        assert 'dossier_process_restarts_total{process="runhost"} 0.0' in text
        assert 'dossier_process_restarts_total{process="postgres"} 0.0' in text
    finally:
        book.close()


def test_each_restart_is_one_json_line_and_counted(tmp_path: Path) -> None:
    book = RestartBook(tmp_path, ["runhost", "assets"])
    try:
        for delay in (0.5, 1.0):
            book.record("runhost", delay=delay, uptime=0.8, code=-9, reason="exited (-9)", pid=10, new_pid=11)
    finally:
        book.close()
    lines = [json.loads(line) for line in (tmp_path / SUPERVISOR_LOG).read_text().splitlines()]
    assert [(line["process"], line["delay_seconds"], line["restarts"]) for line in lines] == [
        ("runhost", 0.5, 1),
        ("runhost", 1.0, 2),
    ]
    assert lines[0]["service"] == "supervisor" and lines[0]["exit_code"] == -9 and lines[0]["new_pid"] == 11
    assert lines[1]["msg"].startswith("runhost exited (-9); restarted after 1.0 s")
    assert read_restarts(tmp_path / RESTARTS_FILE).counts == {"runhost": 2, "assets": 0}


def test_more_than_five_restarts_within_five_minutes_is_a_crash_loop(tmp_path: Path) -> None:
    book = RestartBook(tmp_path, ["runhost", "assets"])
    try:
        for _ in range(6):
            book.record("runhost", delay=0.5, uptime=1.0, code=1, reason="exited (1)")
        for _ in range(5):
            book.record("assets", delay=0.5, uptime=1.0, code=1, reason="exited (1)")
    finally:
        book.close()
    restarts = read_restarts(tmp_path / RESTARTS_FILE)
    assert restarts.crash_loops() == {"runhost": 6}
    # Five minutes on, the same record is no crash loop any more; the counts stay.
    assert restarts.crash_loops(now=time.time() + 301) == {}
    assert restarts.counts == {"runhost": 6, "assets": 5}


def test_no_record_reads_as_no_restarts(tmp_path: Path) -> None:
    assert read_restarts(None).counts == {}
    assert read_restarts(tmp_path / "missing.json").crash_loops() == {}
