"""deploy/observability/: its scrape job, read from prometheus.yml, the metric families the code exports, and
what a running stack's processes export, for the tests that hold the config, the rules and the dashboard to
the running code."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

import shared.metrics  # noqa: F401  (registers every dossier_* family in the default registry)
from shared.restarts import RestartsCollector
from tests.support.stack import RunningStack

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy" / "observability"
PROMTOOL = shutil.which("promtool") or "promtool"
PROMETHEUS = shutil.which("prometheus") or "prometheus"


def scrape_job() -> dict[str, Any]:
    """The one scrape job of prometheus.yml (every process of a local stack)."""
    (job,) = yaml.safe_load((OBSERVABILITY / "prometheus.yml").read_text())["scrape_configs"]
    return dict(job)


def exported_series() -> set[str]:
    """Every series name the dossier_* families can produce, whether or not a sample exists yet."""
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}
    families = [*REGISTRY.collect(), *RestartsCollector(None).collect()]
    return {
        family.name + suffix
        for family in families
        if family.name.startswith("dossier_")
        for suffix in suffixes[family.type]
    }


def named_series(expr: str) -> set[str]:
    return set(re.findall(r"\bdossier_[a-z0-9_]+", expr))


def rules_and_queries() -> list[tuple[str, str]]:
    """(what, expression) of every alert rule and every dashboard query."""
    groups = yaml.safe_load((OBSERVABILITY / "alerts.yml").read_text())["groups"]
    rules = [(f"alert {rule['alert']}", rule["expr"]) for group in groups for rule in group["rules"]]
    dashboard = json.loads((OBSERVABILITY / "grafana-dashboard.json").read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    return rules + [(f"panel {p['title']}", target["expr"]) for p in panels for target in p["targets"]]


def metrics_token(stack: RunningStack) -> str:
    return (stack.local_home() / "metrics-token").read_text().strip()


def scrape(url: str, token: str) -> str | None:
    """A process's exposition, as a scraper with the metrics token reads it (None: nothing listens yet)."""
    try:
        r = httpx.get(url, headers={"Authorization": f"Bearer {token}"})
    except httpx.TransportError:
        return None
    assert r.status_code == 200, (url, r.status_code, r.text[:300])
    return r.text


def sample_names(text: str) -> set[str]:
    """The names of the samples an exposition holds (a family declared without a sample has none)."""
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def promtool(*args: str, cwd: Path | None = None, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, input=input_text, capture_output=True, text=True, check=False)
