"""How the supervisor reads a process's health report."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from shared.health import HealthReporter, read_verdict


def report(path: Path, **state: object) -> Path:
    path.write_text(json.dumps(state))
    return path


def test_a_fresh_good_report_is_healthy(tmp_path: Path) -> None:
    path = report(tmp_path / "s.json", pid=7, ok=True, since=100.0, at=150.0)
    assert read_verdict(path, 7, grace=10, started_at=0, now=155).healthy


def test_a_bad_connection_is_tolerated_for_the_grace_then_not(tmp_path: Path) -> None:
    path = report(tmp_path / "s.json", pid=7, ok=False, since=150.0, at=158.0)
    assert read_verdict(path, 7, grace=10, started_at=0, now=159).healthy
    path = report(tmp_path / "s.json", pid=7, ok=False, since=150.0, at=170.0)
    verdict = read_verdict(path, 7, grace=10, started_at=0, now=171)
    assert not verdict.healthy and "bus connection" in verdict.reason


def test_a_report_that_stops_changing_is_unhealthy(tmp_path: Path) -> None:
    path = report(tmp_path / "s.json", pid=7, ok=True, since=100.0, at=150.0)
    verdict = read_verdict(path, 7, grace=10, started_at=0, now=161)
    assert not verdict.healthy and "not changed" in verdict.reason


def test_a_starting_process_gets_the_grace_from_its_start(tmp_path: Path) -> None:
    earlier = report(tmp_path / "s.json", pid=6, ok=True, since=0.0, at=1.0)
    assert read_verdict(earlier, 7, grace=10, started_at=100, now=105).healthy
    assert not read_verdict(earlier, 7, grace=10, started_at=100, now=111).healthy
    assert read_verdict(tmp_path / "missing.json", 7, grace=10, started_at=100, now=105).healthy


async def test_a_recovery_is_logged_at_info_and_a_loss_at_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    answers = iter([True, False, True])

    async def check() -> bool:
        return next(answers)

    reporter = HealthReporter(tmp_path / "s.json", check)
    with caplog.at_level(logging.INFO, logger="dossier.health"):
        for _ in range(3):
            await reporter.report_once()
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "dossier.health"] == [
        ("WARNING", "health is now bad (the bus connection is not answering)"),
        ("INFO", "health is now ok"),
    ]
