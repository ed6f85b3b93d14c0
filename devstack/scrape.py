"""What a scraper needs from the local stack: each process's /metrics URL, and a Prometheus file of them.

The services' metrics ports are chosen free at every start (and again for a process restarted while another
program holds its port), so no two stacks on one machine want the same ones. Whatever chooses them, the
stack writes every URL to `stack.json` (`metrics`) and the same targets, with their `service` and `process`
labels, to `$DOSSIER_HOME/prometheus-targets.json` in Prometheus's file-based discovery format, which
deploy/observability/prometheus.yml reads: a Prometheus follows the ports without a change to its config.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

from shared.children import service_of

TARGETS_FILE = "prometheus-targets.json"


def metrics_urls(gateway_ports: dict[str, int], metrics_ports: dict[str, int]) -> dict[str, str]:
    """Process → its /metrics URL: a gateway's on its HTTP port (any worker answers for all), a service's own."""
    ports = gateway_ports | metrics_ports
    return {process: f"http://127.0.0.1:{port}/metrics" for process, port in ports.items()}


def write_targets(home: Path, urls: dict[str, str]) -> None:
    """One static group per process, replaced whole (a reader never sees half a file)."""
    groups = [
        {"targets": [urlsplit(url).netloc], "labels": {"service": service_of(process), "process": process}}
        for process, url in urls.items()
    ]
    path = home / TARGETS_FILE
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(groups, indent=2) + "\n")
    os.replace(tmp, path)
