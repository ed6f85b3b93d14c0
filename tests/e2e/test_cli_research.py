"""The research loop through the CLI, as the README shows it: workspace → ingest → run --wait → ledger → checkpoint."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from tests.support import documents
from tests.support.cli import dossier, no_traceback
from tests.support.stack import RunningStack


def test_research_loop_with_json(stack: RunningStack, tmp_path: Path) -> None:
    token = stack.token(f"r{uuid.uuid4().hex[:8]}")

    def run(*args: str, stdin: str | None = None) -> Any:
        done = dossier(stack, token, *args, "--json", stdin=stdin)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    ws = run("workspace", "create", "--title", "Fund X", "--goal", "Assess the liquidity risk of Fund X")
    (tmp_path / "announcement.pdf").write_bytes(documents.pdf(documents.ANNOUNCEMENT))
    (tmp_path / "call.txt").write_text("Call with the manager: redemption gates are unlikely this year.\n")
    ingest = dossier(
        stack,
        token,
        "ingest",
        str(tmp_path / "announcement.pdf"),
        str(tmp_path / "call.txt"),
        "--source-id-from-name",
        "--workspace",
        ws["id"],
        "--json",
    )
    assert ingest.returncode == 0, ingest.stderr
    uploaded = json.loads(ingest.stdout)
    assert uploaded["failed"] == 0 and [r["version"]["status"] for r in uploaded["items"]] == ["active", "active"]
    assert "2/2" in ingest.stderr  # the progress bar goes to stderr, never into the JSON

    finished = run("run", ws["id"], "What do the redemption gates mean for liquidity?", "--wait")
    assert finished["status"] == "completed" and finished["publication"]["version"] == 1
    assert finished["workspace_association"] == "confirmed"

    ledger = run("ledger", finished["id"])
    stages = {row["stage"] for row in ledger["items"]}
    assert {"listed", "read", "included"} <= stages
    assert run("run", "ledger", finished["id"]) == ledger

    files = {f["path"] for f in run("run", "files", finished["id"])["items"]}
    assert "plan.md" in files and "draft.md" in files
    plan = run("run", "plan", finished["id"])
    assert plan["path"] == "plan.md" and "redemption gates" in plan["text"]
    late = dossier(stack, token, "run", "plan", finished["id"], "--from", "-", stdin="# my plan\n")
    assert late.returncode == 1 and late.stderr.startswith("dossier: conflict:")  # the run is over

    shown = run("run", "show", finished["id"])
    assert shown["id"] == finished["id"] and shown["stats"]["source_chars_read"] > 0
    assert run("run", "cancel", finished["id"])["status"] == "completed"  # a finished run stays as it ended
    assert [r["id"] for r in run("workspace", "runs", ws["id"])["items"]] == [finished["id"]]
    conversation = run("conversation", "show", finished["conversation_id"])
    assert [r["id"] for r in conversation["runs"]] == [finished["id"]]
    catalog = run("workspace", "catalog", ws["id"])
    assert {i["kind"] for i in catalog["items"]} >= {"source", "publication"} and catalog["complete"] is True

    checkpoint = run("checkpoint", ws["id"])
    assert checkpoint["author"] == "model" and checkpoint["derived_from"]["run_id"] == finished["id"]
    updated = run("checkpoint", "update", ws["id"], "--add-question", "Is the gate legal?")
    assert updated["revision"] == checkpoint["revision"] + 1
    revisions = run("checkpoint", "revisions", ws["id"])
    assert revisions["items"][-1]["revision"] == updated["revision"]
    assert run("checkpoint", "show", ws["id"], "--revisions") == revisions

    found = run("evidence", "search", "gates")["items"]
    assert found and run("evidence", "read", found[0]["evidence_id"])["text"]
    source = run("source", "show", "call.txt")
    assert source["active_version"] == 1
    assert run("asset", "show", source["versions"][0]["asset_id"])["source_id"] == "call.txt"


def test_run_wait_for_a_person(stack: RunningStack) -> None:
    """Without --json: the answer, the ledger summary and the publication, then the lifecycle commands."""
    token = stack.token(f"h{uuid.uuid4().hex[:8]}")
    created = dossier(stack, token, "workspace", "create", "--title", "Fund Y", "--goal", "Assess Fund Y", "--json")
    ws_id = json.loads(created.stdout)["id"]

    waited = dossier(stack, token, "run", "start", ws_id, "Is Fund Y liquid?", "--wait")
    assert waited.returncode == 0, waited.stderr
    assert "## What the new evidence says" in waited.stdout and "ledger: " in waited.stdout
    assert "workspace association: confirmed" in waited.stdout
    assert "completed:" in waited.stderr  # progress lines, on stderr

    archived = dossier(stack, token, "workspace", "archive", ws_id)
    assert archived.returncode == 0 and "status:     archived" in archived.stdout
    refused = dossier(stack, token, "run", ws_id, "Another question?")
    assert refused.returncode == 1 and refused.stderr.startswith("dossier: conflict:")
    assert dossier(stack, token, "workspace", "unarchive", ws_id).returncode == 0

    unconfirmed = dossier(stack, token, "workspace", "delete", ws_id)
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr and no_traceback(unconfirmed)
    deleted = dossier(stack, token, "workspace", "delete", ws_id, "--yes", "--json")
    assert deleted.returncode == 0 and json.loads(deleted.stdout) == {"id": ws_id, "deleted": True}
    gone = dossier(stack, token, "workspace", "show", ws_id)
    assert gone.returncode == 1 and gone.stderr.strip() == "dossier: not_found: workspace not found"
