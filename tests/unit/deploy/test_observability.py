"""deploy/observability/ passes promtool, and names only what the code exports at the ports the stack uses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from devstack.stack import METRICS_BASE_PORT, metrics_port
from shared.contracts.common import SERVICES
from tests.support.observability import (
    GATEWAY_PORT,
    OBSERVABILITY,
    exported_series,
    named_series,
    promtool,
    scrape_targets,
)


def test_promtool_accepts_the_scrape_config(tmp_path: Path) -> None:
    # promtool opens the credential files the config names (beside it): stand-ins, as an operator links them.
    for name in ("prometheus.yml", "alerts.yml"):
        shutil.copy(OBSERVABILITY / name, tmp_path / name)
    for target in scrape_targets():
        (tmp_path / target.credentials_file).write_text("a-token\n")
    result = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_accepts_the_alert_rules() -> None:
    result = promtool("check", "rules", str(OBSERVABILITY / "alerts.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "12 rules found" in result.stdout


def test_the_config_scrapes_every_process_at_its_fixed_port_with_a_service_label() -> None:
    targets = scrape_targets()
    assert [t.process for t in targets] == ["gateway", *SERVICES]
    for target in targets:
        if target.service == "gateway":
            assert (target.port, target.credentials_file) == (GATEWAY_PORT, "admin-token")
        else:
            assert target.port == metrics_port(METRICS_BASE_PORT, target.service, target.process)
            assert target.credentials_file == "metrics-token"


def test_replicas_get_ports_of_their_own_after_every_first_replica() -> None:
    ports = [metrics_port(9464, s, p) for s in SERVICES for p in (s, f"{s}.2", f"{s}.3", f"{s}.4")]
    assert len(set(ports)) == len(ports) == 4 * len(SERVICES)
    assert sorted(ports) == list(range(9464, 9464 + 4 * len(SERVICES)))
    assert metrics_port(9464, "workspace", "workspace.2") == 9464 + len(SERVICES)


def test_every_alert_names_an_exported_metric() -> None:
    exported = exported_series()
    rules = [r for g in yaml.safe_load((OBSERVABILITY / "alerts.yml").read_text())["groups"] for r in g["rules"]]
    for rule in rules:
        assert named_series(rule["expr"]) <= exported, rule["alert"]
    assert {"dossier_outbox_lag_seconds", "dossier_dead_letters_total", "dossier_extraction_failures_total"} <= {
        name for rule in rules for name in named_series(rule["expr"])
    }


def test_every_dashboard_panel_queries_exported_metrics() -> None:
    dashboard = json.loads((OBSERVABILITY / "grafana-dashboard.json").read_text())
    exported = exported_series()
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels
    for panel in panels:
        exprs = [t["expr"] for t in panel["targets"]]
        assert exprs, panel["title"]
        for expr in exprs:
            assert named_series(expr), (panel["title"], expr)
            assert named_series(expr) <= exported, (panel["title"], expr)
    titles = {p["title"] for p in dashboard["panels"] if p["type"] == "row"}
    assert titles == {"Golden signals", "Runs", "Ingest", "Outbox and events"}
