"""The Python client with its extras, installed as the docs say (`pip install './clients/python[langchain,
agents]'`) into a fresh virtual environment beside mcp 1.x (which langchain-mcp-adapters pins): both
example agents research with scripted models, through tools whose schemas hold no run id and no lease."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import Api
from tests.support.cli import cli_env
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.stack import RunningStack
from tests.support.venv import INSTALL_SECONDS, fresh_venv, run_script

SCRIPTS = Path(__file__).parent / "client_venv"
TOOLS = {
    "search": {"query", "limit"},
    "read": {"ref"},
    "write_note": {"name", "text"},
    "finish": {"answer", "title"},
}


@pytest.fixture(scope="module")
def extras_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("client-extras-venv") / "venv"
    return fresh_venv(where, "./clients/python[langchain,agents]", "mcp>=1.19,<2")


def setting(api: Api) -> tuple[str, str]:
    """A workspace of a scope of its own with Report A and the announcement: its id and the report's."""
    ws = api.workspace()
    a = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    assert api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])["status"] == "active"
    api.wait_catalog(ws["id"], 2)
    return ws["id"], a["id"]


def properties(schema: Any) -> set[str]:
    return set(schema["properties"])


@pytest.mark.parametrize("framework", ["langchain", "agents"])
@pytest.mark.timeout(INSTALL_SECONDS + 300)
def test_an_example_agent_researches_through_tools_without_run_id_or_lease(
    extras_python: Path, stack: RunningStack, framework: str
) -> None:
    api = Api(stack)
    ws, report = setting(api)
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    env = cli_env(stack, token, OPENAI_AGENTS_DISABLE_TRACING="1")
    question, query = "What changed for Fund X?", "redemption gates"
    result = json.loads(
        run_script(extras_python, SCRIPTS / "drive_examples.py", framework, ws, question, query, env=env, timeout=240)
    )

    assert result["mcp"].startswith("1."), "the extras install beside mcp 1.x"
    schemas = result["schemas"]
    assert {name: properties(schema) for name, schema in schemas.items()} == TOOLS
    text = json.dumps(schemas).lower()
    assert "run_id" not in text and "lease" not in text
    assert all(field.get("description") for s in schemas.values() for field in s["properties"].values())

    run = result["run"]
    assert run["status"] == "completed" and run["driver"] == "external", run
    published = api.read(run["publication"])
    sources = {(s["kind"], s["id"], s["version"]) for s in published["sources"]}
    assert sources == {("publication", report, 1), ("source", "announcement", 1)}, published
    assert run["stats"]["claims_supported"] == 2, published["body"]
    assert "notes/findings.md" in api.files(run["id"])
    # The missing id was refused to the model as the API's error envelope, and the agent went on.
    assert [r["error"]["code"] for r in result["refusals"]] in (["not_found"], ["unavailable"])
    assert len([r for r in api.ledger(run["id"]) if r["stage"] == "read"]) == 2
