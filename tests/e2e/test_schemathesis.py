"""schemathesis against the running gateway's own OpenAPI document (The API's error rules (docs/api.md): no input gets a 500).

It generates requests for every documented operation (boundary values, wrong types, odd text, huge numbers)
with a user's token and fails on any finding: a server error, or a response that contradicts the schema the
document declares for it. Path ids are drawn, most of the time, from records that exist in the fuzzer's
scope, so requests reach the rules behind the 404s. The fuzzer's time budget bounds the run; the seed makes
a finding reproducible (`DOSSIER_FUZZ_SEED` picks another).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.api import Api
from tests.support.stack import RunningStack

BUDGET_SECONDS = 75


@pytest.mark.timeout(BUDGET_SECONDS * 3)
def test_schemathesis_finds_nothing(stack: RunningStack, tmp_path: Path) -> None:
    api = Api(stack)
    token = stack.token(api.scope)
    (tmp_path / "schemathesis.toml").write_text(existing_ids(api))
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{stack.url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--checks",
        "not_a_server_error,response_schema_conformance",
        "--max-examples",
        "25",
        "--max-time",
        str(BUDGET_SECONDS),
        # One worker: hypothesis's lambda introspection is not thread-safe and errs now and then with more.
        "--workers",
        "1",
        "--seed",
        os.environ.get("DOSSIER_FUZZ_SEED", "3"),
        "--suppress-health-check",
        "all",
        "--request-timeout",
        "30",
        "--no-color",
    ]
    # Its own working directory: hypothesis keeps its example database where it runs.
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=BUDGET_SECONDS * 3)
    report = result.stdout[-20000:] + result.stderr[-5000:]
    assert result.returncode == 0, report
    assert "API Operations" in report and "Tested: 0" not in report, report
    assert "schemathesis.toml" in report, "the fuzzer did not load the ids of existing records"


def existing_ids(api: Api) -> str:
    """A schemathesis config whose fuzz dictionaries hold real ids of the fuzzer's own scope."""
    ws = api.workspace()
    pub = api.publish("Report A", "Fund X holds 30% in cash.", ws["id"])
    source = api.upload(b"Fund X redemptions take 30 days.", "S1", "note.txt", ws["id"])
    run = api.start_run(ws["id"], "Does Fund X liquidity hold?")
    html = {"file": ("a.html", b"<html><body><p>Report</p></body></html>", "text/html")}
    artifact = api.ok("POST", "/v1/artifacts", data={"title": "Report"}, files=html)
    ids = {
        "workspace_id": ws["id"],
        "pub_id": pub["id"],
        "run_id": run["id"],
        "conversation_id": run["conversation_id"],
        "source_id": source["source_id"],
        "asset_id": source["asset_id"],
        "artifact_id": artifact["id"],
        "version": 1,
    }
    lines = []
    for name, value in ids.items():
        lines += [f"[dictionaries.{name}]", f"values = [{json.dumps(value)}]", ""]
    lines.append("[parameters]")
    lines += [f'"path.{name}" = {{ dictionary = "{name}", probability = 0.7 }}' for name in ids]
    return "\n".join(lines) + "\n"
