"""`dossier workspace …` and `dossier checkpoint` as a user runs them: a subprocess against the stack."""

from __future__ import annotations

import json
import uuid

import httpx

from tests.support.cli import dossier
from tests.support.stack import RunningStack


def test_workspace_and_checkpoint_commands(stack: RunningStack) -> None:
    token = stack.token(f"s{uuid.uuid4().hex[:8]}")
    created = dossier(stack, token, "workspace", "create", "--title", "Fund X", "--goal", "Assess liquidity", "--json")
    assert created.returncode == 0, created.stderr
    ws = json.loads(created.stdout)
    assert ws["goal"] == {"version": 1, "text": "Assess liquidity", "created_at": ws["goal"]["created_at"]}

    listed = dossier(stack, token, "workspace", "list")
    assert listed.returncode == 0 and ws["id"] in listed.stdout and "Fund X" in listed.stdout
    assert json.loads(dossier(stack, token, "workspace", "show", ws["id"], "--json").stdout) == ws

    revised = dossier(stack, token, "workspace", "goal", ws["id"], "Which judgements still hold?", "--json")
    assert revised.returncode == 0 and json.loads(revised.stdout)["goal"]["version"] == 2
    stale = dossier(stack, token, "workspace", "goal", ws["id"], "late", "--expected-version", "1")
    assert stale.returncode == 1 and stale.stderr.startswith("dossier: conflict:")
    versions = json.loads(dossier(stack, token, "workspace", "goal", ws["id"], "--json").stdout)["items"]
    assert [v["version"] for v in versions] == [1, 2]

    none_yet = dossier(stack, token, "checkpoint", ws["id"])
    assert none_yet.returncode == 1 and "not_found" in none_yet.stderr
    put = httpx.put(
        f"{stack.url}/v1/workspaces/{ws['id']}/checkpoint",
        json={"expected_revision": 0, "summary": "Report A still holds.", "add_questions": ["Is the gate legal?"]},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert put.status_code == 200
    shown = dossier(stack, token, "checkpoint", ws["id"])
    assert shown.returncode == 0, shown.stderr
    assert "revision 1 (valid, advisory" in shown.stdout and "Report A still holds." in shown.stdout
    assert "[ ] q_" in shown.stdout and "Is the gate legal?" in shown.stdout
    as_json = json.loads(dossier(stack, token, "checkpoint", ws["id"], "--revisions", "--json").stdout)
    assert [c["revision"] for c in as_json["items"]] == [1]

    missing = dossier(stack, token, "workspace", "show", "ws_missing")
    assert missing.returncode == 1 and missing.stderr.strip() == "dossier: not_found: workspace not found"
