"""The example outside agent (examples/outside_agent.py) runs as a user runs it, against the stack."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.api import Api
from tests.support.cli import cli_env
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.stack import ROOT, RunningStack


def test_the_example_outside_agent_researches_the_running_example(stack: RunningStack) -> None:
    api = Api(stack)
    ws = api.workspace()
    a = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    assert api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])["status"] == "active"
    api.wait_catalog(ws["id"], 2)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    argv = [sys.executable, "examples/outside_agent.py", ws["id"], "What changed for Fund X?"]
    done = subprocess.run(
        [*argv, "--query", "redemption gates"],
        cwd=ROOT,
        env=cli_env(stack, token),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)
    assert run["status"] == "completed" and run["driver"] == "external"
    assert run["agent"] == {"name": "examples/outside_agent.py", "model": None}
    published = api.ok("GET", f"/v1/publications/{run['publication']['id']}/versions/1")
    sources = {(s["kind"], s["id"], s["version"]) for s in published["sources"]}
    assert sources == {("publication", a["id"], 1), ("source", "announcement", 1)}
    assert run["stats"]["claims_supported"] == 2, published["body"]
    assert "notes/announcement.md" in api.files(run["id"])
