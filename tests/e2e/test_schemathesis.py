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

import httpx
import pytest
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import SchemathesisConfig

from tests.support.api import Api
from tests.support.stack import RunningStack

BUDGET_SECONDS = 75
HOOKS = Path(__file__).parents[1] / "support" / "schemathesis_hooks.py"


@pytest.mark.timeout(BUDGET_SECONDS * 3)
def test_schemathesis_finds_nothing(stack: RunningStack, tmp_path: Path) -> None:
    api = Api(stack)
    token = stack.token(api.scope)
    (tmp_path / "schemathesis.toml").write_text(existing_ids(api) + rules(cursor_operations(stack)))
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{stack.url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        # No --checks: every check runs, schemathesis's default and the same set as `--checks all` (asserted
        # below): schema-valid requests must be accepted (positive_data_acceptance) and schema-invalid ones
        # refused (negative_data_rejection), so the document is exactly as strict as the server. A --checks flag
        # would also override the one check `rules` turns off for named operations.
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
    # Its own working directory: hypothesis keeps its example database where it runs. The hooks correct how the
    # fuzzer judges a broken multipart body (tests/support/schemathesis_hooks.py).
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)}
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=BUDGET_SECONDS * 3)
    # The failures first (a long request body can fill any tail of the output), then the summary.
    failures = result.stdout.find("FAILURES")
    report = (result.stdout[failures : failures + 15000] if failures >= 0 else "") + result.stdout[-5000:]
    report += result.stderr[-5000:]
    assert result.returncode == 0, report
    assert "API Operations" in report and "Tested: 0" not in report, report
    assert every_check_runs(tmp_path / "schemathesis.toml")
    assert "schemathesis.toml" in report, "the fuzzer did not load the ids of existing records"


# Rules of the API that a JSON Schema cannot state, so schema-valid data may still be refused for them (`rules`
# writes them into the fuzzer's config; an opaque cursor is the last, see `cursor_operations`):
# - U+0000 and lone surrogates in any string are refused everywhere (docs/api.md's error rules; PostgreSQL
#   cannot store the one, UTF-8 cannot encode the other). A pattern on every string of the document would have
#   to be merged with each field's own pattern; the fuzzer is told instead not to make such text.
# - An uploaded file's type is read from its bytes (PDF, DOCX, XLSX, HTML, text; artifacts HTML only): a schema
#   says "binary", and random bytes are 415 `unsupported`.
# - An import names an approved root: a deployment's configuration, some roots private to one scope, so the
#   document cannot list them; another name is 422.
# - ensure_resource_availability takes any 404 from an operation under a just-created workspace for the
#   workspace lost. A workspace's checkpoint exists only after its first PUT (the GET before it is 404 "no
#   checkpoint yet"), and associating a source or an artifact, or starting a run with history, is 404 for the
#   source, artifact or publication the body names when that does not exist. For those operations alone that
#   check is off; every other check runs on them.
# - A body's size is bounded in bytes (1 MiB of JSON) before it is parsed, a text field in characters: 200,000
#   characters each written as a six-byte `\\u00bc` escape is over the byte limit, valid or not, and is
#   refused with 413 `too_large`, a status the document names for those operations. Both checks take it.
# positive_data_acceptance's own list with 413 (above), and the one status each operation may answer to
# schema-valid data; negative_data_rejection's own list with 413.
ACCEPTED = ["2xx", "401", "403", "404", "409", "413", "429", "5xx"]
REJECTED = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
GENERATION = f"""
[generation]
allow-x00 = false
codec = "utf-8"

[checks.positive_data_acceptance]
expected-statuses = {json.dumps(ACCEPTED)}

[checks.negative_data_rejection]
expected-statuses = {json.dumps(REJECTED)}
"""
ALSO_ACCEPTED = {"POST /v1/assets": "415", "POST /v1/artifacts": "415", "POST /v1/assets/import": "422"}
NO_RESOURCE_CHECK = (
    "GET /v1/workspaces/{workspace_id}/checkpoint",
    "POST /v1/workspaces/{workspace_id}/sources",
    "POST /v1/workspaces/{workspace_id}/artifacts",
    "POST /v1/workspaces/{workspace_id}/runs",
)


def rules(cursor_operations: list[str]) -> str:
    """The config sections of the rules above; a list's cursor is one (see `cursor_operations`)."""
    sections = [GENERATION]
    also = ALSO_ACCEPTED | dict.fromkeys(cursor_operations, "422")
    for name, status in also.items():
        statuses = json.dumps(sorted([*ACCEPTED, status]))
        sections.append(f'[[operations]]\ninclude-name = "{name}"\n')
        sections.append(f"checks.positive_data_acceptance.expected-statuses = {statuses}\n")
    for name in NO_RESOURCE_CHECK:
        sections.append(
            f'[[operations]]\ninclude-name = "{name}"\nchecks.ensure_resource_availability.enabled = false\n'
        )
    return "\n".join(sections)


def every_check_runs(config_file: Path) -> bool:
    """The config the run loaded leaves every registered check on (positive_data_acceptance and
    negative_data_rejection among them); `rules` turns one off for named operations only."""
    load_all_checks()
    checks = SchemathesisConfig.from_path(str(config_file)).projects.get_default().checks_config_for()
    names = {check.__name__ for check in CHECKS.get_all() if hasattr(check, "__name__")}
    assert {"positive_data_acceptance", "negative_data_rejection", "allow_header_conformance"} <= names
    off = sorted(name for name in names if not checks.get_by_name(name=name).enabled)
    assert not off, off
    return True


def cursor_operations(stack: RunningStack) -> list[str]:
    """A list's `cursor` is opaque (base64url of the last item's sort key, shared/paging.py): the document
    bounds its length, but only a cursor the list gave out is accepted, so a made-up one may answer 422."""
    spec = httpx.get(f"{stack.url}/openapi.json").json()
    return [
        f"{method.upper()} {path}"
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        if any(p["name"] == "cursor" for p in operation.get("parameters", []))
    ]


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
