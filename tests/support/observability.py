"""deploy/observability/: its scrape targets, read from prometheus.yml, and the metric families the code
exports, for the tests that hold the config, the rules and the dashboard to the running code."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml
from prometheus_client import REGISTRY

import shared.metrics  # noqa: F401  (registers every dossier_* family in the default registry)
from devstack.stack import METRICS_BASE_PORT

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy" / "observability"
# The gateway's port in the config: the stack's default DOSSIER_HTTP_PORT.
GATEWAY_PORT = 8080
PROMTOOL = shutil.which("promtool") or "promtool"


@dataclass(frozen=True)
class Target:
    job: str
    host: str
    port: int
    process: str
    service: str
    credentials_file: str


def scrape_targets() -> list[Target]:
    config = yaml.safe_load((OBSERVABILITY / "prometheus.yml").read_text())
    found = []
    for job in config["scrape_configs"]:
        for group in job["static_configs"]:
            for target in group["targets"]:
                host, port = target.rsplit(":", 1)
                labels = group["labels"]
                credentials = job["authorization"]["credentials_file"]
                found.append(
                    Target(job["job_name"], host, int(port), labels["process"], labels["service"], credentials)
                )
    return found


def stack_port(target: Target, http_port: int, metrics_base: int) -> int:
    """Where the config's target is on a stack started with other base ports: the same offset from them."""
    if target.service == "gateway":
        return http_port + target.port - GATEWAY_PORT
    return metrics_base + target.port - METRICS_BASE_PORT


def exported_series() -> set[str]:
    """Every series name the dossier_* families can produce, whether or not a sample exists yet."""
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}
    return {
        family.name + suffix
        for family in REGISTRY.collect()
        if family.name.startswith("dossier_")
        for suffix in suffixes[family.type]
    }


def named_series(expr: str) -> set[str]:
    return set(re.findall(r"\bdossier_[a-z0-9_]+", expr))


def promtool(*args: str, cwd: Path | None = None, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, input=input_text, capture_output=True, text=True, check=False)
