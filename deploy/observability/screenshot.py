"""Capture docs/screens/observability-golden-signals.png: the dashboard's golden-signal queries, drawn by
Prometheus's own graph page, over a running local stack under load.

    .venv/bin/python deploy/observability/screenshot.py [--home .dossier] [--minutes 4]

It reads the stack's `stack.json` and tokens from `--home` (a stack started with `make up`), writes a copy of
prometheus.yml with a 5 s scrape interval beside a temporary data folder and links to the home's metrics token
and scrape targets (the stack's real ports), starts
`prometheus` (Debian's package; its classic graph page needs no Grafana), sends a mix of requests for
`--minutes` (workspaces, publications, uploads, runs, searches, a share of 404s and 422s), then opens one
graph panel per golden-signal query of grafana-dashboard.json in Chromium (Playwright, /usr/bin/chromium)
and saves a full-page screenshot. Prometheus is stopped at the end; nothing is left running.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import httpx
import yaml
from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from devstack.procs import free_port, port_open  # noqa: E402
from shared.children import wait_until  # noqa: E402

# The golden-signal panels of grafana-dashboard.json, drawn in this order.
GOLDEN_PANELS = (
    "HTTP requests by status",
    "HTTP 5xx ratio",
    "HTTP latency p50 / p99 by route",
    "Bus requests by service and code",
    "Bus latency p99 by service",
    "Saturation: gateway connections and refusals",
)
# Grafana fills in the range; Prometheus's page needs a window that holds a few scrapes.
RATE_WINDOW = "1m"
# Two panels a row, as a dashboard lays them out, and the fixed navigation bar kept at the top of the page
# (fixed, it lands in the middle of a full-page capture). Applied before the page draws its graphs, which
# take their width from their column.
LAYOUT = """
#graph_container { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); column-gap: 24px; }
#graph_container > :first-child, #graph_container > :last-child { grid-column: 1 / -1; }
.navbar.fixed-top { position: absolute; }
"""


def golden_queries() -> list[tuple[str, str]]:
    dashboard = json.loads((HERE / "grafana-dashboard.json").read_text())
    panels = {p["title"]: p for p in dashboard["panels"] if p.get("type") == "timeseries"}
    return [
        (title, target["expr"].replace("[5m]", f"[{RATE_WINDOW}]"))
        for title in GOLDEN_PANELS
        for target in panels[title]["targets"]
    ]


def scrape_config(home: Path, work: Path) -> Path:
    """prometheus.yml with a 5 s interval, beside links to the home's metrics token and the targets file the
    stack keeps up to date (its chosen ports), as docs/operations.md has an operator link them."""
    config = yaml.safe_load((HERE / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = "5s"
    config["global"]["evaluation_interval"] = "5s"
    config["rule_files"] = [str(HERE / "alerts.yml")]
    for name in ("metrics-token", "prometheus-targets.json"):
        (work / name).symlink_to(home / name)
    path = work / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def load(url: str, admin_token: str, seconds: float) -> None:
    """A mix of what users do, with some refusals, so every golden signal has something to show."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    scope = f"screens{random.randrange(10**6)}"
    with httpx.Client(base_url=url, timeout=60) as client:
        token = client.post("/v1/admin/tokens", json={"scope": scope, "principal": "load"}, headers=admin).json()
        client.headers["Authorization"] = f"Bearer {token['token']}"
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            n += 1
            ws = client.post("/v1/workspaces", json={"title": f"Fund {n}", "goal": "Assess liquidity risk"}).json()
            client.post(
                "/v1/publications",
                json={"title": f"Report {n}", "body": f"Fund {n} holds 30% in cash.", "workspace_id": ws["id"]},
            )
            files = {"file": (f"note{n}.txt", f"Fund {n} redemptions take 30 days.".encode(), "text/plain")}
            client.post("/v1/assets", data={"source_id": f"S{n}", "workspace_id": ws["id"]}, files=files)
            if n % 3 == 0:
                question = {"question": "Does the fund's liquidity hold?", "request_id": f"load-{scope}-{n}"}
                client.post(f"/v1/workspaces/{ws['id']}/runs", json=question)
            for _ in range(5):
                client.get("/v1/workspaces")
                client.get("/v1/evidence/search", params={"q": "redemptions"})
                client.get(f"/v1/workspaces/{ws['id']}/catalog")
            client.get("/v1/workspaces/ws_missing")  # 404
            client.post("/v1/workspaces", json={"title": ""})  # 422


def capture(prometheus: str, out: Path) -> None:
    params: dict[str, str] = {}
    for i, (_, expr) in enumerate(golden_queries()):
        params |= {f"g{i}.expr": expr, f"g{i}.tab": "0", f"g{i}.range_input": "5m", f"g{i}.stacked": "0"}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"))
        try:
            page = browser.new_page(viewport={"width": 1800, "height": 1000})
            page.add_init_script(
                "document.addEventListener('DOMContentLoaded', () => {"
                " const style = document.createElement('style');"
                f" style.textContent = {json.dumps(LAYOUT)};"
                " document.head.appendChild(style); });"
            )
            page.goto(f"{prometheus}/classic/graph?{urllib.parse.urlencode(params)}")
            page.wait_for_selector(".graph_area svg", timeout=30_000)
            page.wait_for_function(f"document.querySelectorAll('.graph_area svg').length >= {len(params) // 4 - 1}")
            page.wait_for_load_state("networkidle")
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
        finally:
            browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, default=Path(os.environ.get("DOSSIER_HOME", ".dossier")))
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screens" / "observability-golden-signals.png")
    args = parser.parse_args()
    home = args.home.resolve()
    state = json.loads((home / "stack.json").read_text())
    with tempfile.TemporaryDirectory(prefix="dossier-prometheus-") as tmp:
        work = Path(tmp)
        port = free_port()
        prometheus = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={scrape_config(home, work)}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until(lambda: port_open(port), timeout=30, what="prometheus", alive=lambda: prometheus.poll() is None)
            load(state["gateway_url"], (home / "admin-token").read_text().strip(), args.minutes * 60)
            time.sleep(10)  # two more scrapes, so the last of the load is on the graphs
            capture(f"http://127.0.0.1:{port}", args.out)
        finally:
            prometheus.terminate()
            prometheus.wait(30)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
