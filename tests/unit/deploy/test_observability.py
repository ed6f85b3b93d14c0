"""deploy/observability/ passes promtool, finds the stack's targets where the stack writes them, names only
what the code exports, and its alerts fire on the first event of a counter that starts at 0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from devstack.scrape import TARGETS_FILE, metrics_urls, write_targets
from tests.support.observability import (
    OBSERVABILITY,
    exported_series,
    named_series,
    promtool,
    rules_and_queries,
    scrape_job,
)


def test_promtool_accepts_the_scrape_config(tmp_path: Path) -> None:
    # promtool opens the files the config names (beside it): stand-ins, as an operator links them.
    for name in ("prometheus.yml", "alerts.yml"):
        shutil.copy(OBSERVABILITY / name, tmp_path / name)
    (tmp_path / "metrics-token").write_text("a-token\n")
    write_targets(tmp_path, metrics_urls({"gateway": 8080}, {"workspace": 10001}))
    result = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_accepts_the_alert_rules() -> None:
    result = promtool("check", "rules", str(OBSERVABILITY / "alerts.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "13 rules found" in result.stdout


def test_one_job_reads_the_targets_the_stack_writes_with_the_metrics_token() -> None:
    job = scrape_job()
    assert "static_configs" not in job
    assert [c["files"] for c in job["file_sd_configs"]] == [[TARGETS_FILE]]
    # The stack's own file names, which an operator links beside the config.
    assert job["authorization"] == {"type": "Bearer", "credentials_file": "metrics-token"}
    # The restart counter's own `process` label wins over the target's (the gateway exports every process's).
    assert job["honor_labels"] is True


def test_the_targets_file_labels_every_process_with_its_service(tmp_path: Path) -> None:
    gateways = {"gateway": 8080, "gateway.2": 8081}
    services = {"workspace": 10001, "runhost.2": 10002}
    write_targets(tmp_path, metrics_urls(gateways, services))
    groups = json.loads((tmp_path / TARGETS_FILE).read_text())
    assert groups == [
        {"targets": ["127.0.0.1:8080"], "labels": {"service": "gateway", "process": "gateway"}},
        {"targets": ["127.0.0.1:8081"], "labels": {"service": "gateway", "process": "gateway.2"}},
        {"targets": ["127.0.0.1:10001"], "labels": {"service": "workspace", "process": "workspace"}},
        {"targets": ["127.0.0.1:10002"], "labels": {"service": "runhost", "process": "runhost.2"}},
    ]


def test_every_rule_and_dashboard_query_names_an_exported_metric() -> None:
    exported = exported_series()
    for what, expr in rules_and_queries():
        assert named_series(expr) or what == "alert DossierTargetDown", (what, expr)
        assert named_series(expr) <= exported, (what, expr)
    named = {name for _, expr in rules_and_queries() for name in named_series(expr)}
    assert {"dossier_dead_letters_total", "dossier_process_restarts_total"} <= named
    dashboard = json.loads((OBSERVABILITY / "grafana-dashboard.json").read_text())
    titles = {p["title"] for p in dashboard["panels"] if p["type"] == "row"}
    assert titles == {"Golden signals", "Runs", "Ingest", "Outbox and events"}


def test_the_alerts_fire_on_a_crash_loop_and_on_the_first_event_of_a_counter_exported_at_zero(
    tmp_path: Path,
) -> None:
    """promtool's rule tests on made-up series: a counter exported at 0 before its first event fires on that
    event; one that appears only with its first event (as these did before) never does."""
    shutil.copy(OBSERVABILITY / "alerts.yml", tmp_path / "alerts.yml")
    restarts = 'dossier_process_restarts_total{process="runhost",job="dossier",service="gateway"}'
    dead = 'dossier_dead_letters_total{consumer="workspace_run_completed",service="workspace"}'
    parked = 'dossier_outbox_parked_total{type="run.completed",service="runhost"}'
    cases = {
        "rule_files": ["alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": restarts, "values": "0 2 4 6 6 6"},
                    {"series": dead, "values": "0 0 1 1 1 1"},  # exported at 0, then its first event
                    {"series": parked, "values": "_ _ 1 1 1 1"},  # absent until its first event
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "5m",
                        "alertname": "DossierCrashLoop",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "page", "process": "runhost"},
                                "exp_annotations": {
                                    "summary": "runhost was restarted 6 times in 5 minutes (logs/supervisor.log)"
                                },
                            }
                        ],
                    },
                    {
                        "eval_time": "3m",
                        "alertname": "DossierDeadLetters",
                        "exp_alerts": [
                            {
                                "exp_labels": {
                                    "severity": "ticket",
                                    "service": "workspace",
                                    "consumer": "workspace_run_completed",
                                },
                                "exp_annotations": {
                                    "summary": "workspace/workspace_run_completed: events sent to the dead-letter stream"
                                },
                            }
                        ],
                    },
                    {"eval_time": "3m", "alertname": "DossierOutboxParked", "exp_alerts": []},
                ],
            }
        ],
    }
    (tmp_path / "cases.yml").write_text(yaml.safe_dump(cases))
    result = promtool("test", "rules", "cases.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
