"""schemathesis against the running gateway's own OpenAPI document (CONTRACT "Errors": no input gets a 500).

It generates requests for every documented operation (boundary values, wrong types, odd text, huge numbers)
with a user's token and fails on any finding: a server error, or a response that contradicts the schema the
document declares for it. The fuzzer's time budget bounds the run; the seed makes a finding reproducible
(`DOSSIER_FUZZ_SEED` picks another).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.stack import RunningStack

BUDGET_SECONDS = 75


@pytest.mark.timeout(BUDGET_SECONDS * 3)
def test_schemathesis_finds_nothing(stack: RunningStack, tmp_path: Path) -> None:
    token = stack.token(f"fuzz{uuid.uuid4().hex[:8]}")
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
