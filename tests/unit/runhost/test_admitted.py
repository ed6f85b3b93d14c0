"""A row of `runs` as an earlier version of the run host stored it loads as the typed run, unchanged."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from services.runhost.admitted import AdmittedRun

NOW = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


def stored_row(**changes: Any) -> dict[str, Any]:
    """Every column, the JSON ones as admission and finishing wrote them (asyncpg decodes them to dicts)."""
    row: dict[str, Any] = {
        "id": "run_1",
        "scope": "acme",
        "workspace_id": "ws_1",
        "conversation_id": "conv_1",
        "request_id": "req-1",
        "params_hash": "ab" * 32,
        "status": "running",
        "question": "What changed?",
        "model": "extractive",
        "goal_version": 2,
        "goal_text": "Track the market",
        "catalog": {
            "items": [
                {
                    "kind": "publication",
                    "id": "pub_1",
                    "version": 3,
                    "title": "Earlier report",
                    "created_at": "2026-11-01T08:00:00.123456Z",
                    "run_id": "run_0",
                    "available": True,
                    "reason": None,
                },
                {
                    "kind": "source",
                    "id": "src-a",
                    "version": 1,
                    "title": "a.pdf",
                    "created_at": "2026-11-01T07:00:00Z",
                    "run_id": None,
                    "available": False,
                    "reason": "retired",
                },
            ],
            "complete": False,
            "omitted": 4,
        },
        "history": [{"publication_id": "pub_1", "version": 3}],
        "limits": {"max_steps": 40, "max_chars": 200000, "max_seconds": 600},
        "publication_id": None,
        "publication_version": None,
        "checkpoint_proposal": {"status": "none", "revision": None},
        "workspace_association": "pending",
        "error": None,
        "cancel_requested": False,
        "lease_owner": "host:1",
        "lease_epoch": 2,
        "lease_expires_at": NOW,
        "steps": 7,
        "chars_read": 1200,
        "model_requests": 3,
        "created_at": NOW,
        "started_at": NOW,
        "finished_at": None,
        "model_input_chars_max": 900,
        "model_input_chars_total": 2500,
        "source_chars_read": 800,
        "tokens_in": None,
        "tokens_out": None,
        "final_answer": "# Answer",
        # Kept as the model sent it, valid or not: finishing decides (an invalid one never fails the run).
        "final_proposal": {"summary": "", "expected_revision": "x"},
        "principal": "alice",
        "claims_supported": 0,
        "claims_weak": 0,
        "claims_unsupported": 0,
        "driver": "dossier",
        "lease_seconds": None,
        "final_title": None,
        "trace_headers": None,
    }
    return row | changes


def test_a_stored_run_loads_with_its_admission_parsed() -> None:
    run = AdmittedRun.model_validate(stored_row())
    assert [i.id for i in run.catalog.items] == ["pub_1", "src-a"] and run.catalog.omitted == 4
    assert run.limits.max_steps == 40 and run.limits.max_seconds == 600.0
    assert run.history[0].publication_id == "pub_1" and run.checkpoint_proposal.status == "none"
    assert run.final_proposal == {"summary": "", "expected_revision": "x"}
    assert run.grant_refs() == ["publication:pub_1@3", "source:src-a@1"]


def test_the_frozen_catalog_dumps_back_as_it_was_stored() -> None:
    stored = stored_row()
    run = AdmittedRun.model_validate(stored)
    # A run admitted before the catalog paged has no cursor to its later pages.
    assert run.catalog.model_dump(mode="json") == stored["catalog"] | {"next_cursor": None}
    assert run.catalog_as_of is None


def test_a_column_added_later_is_ignored_and_the_contract_run_is_the_same() -> None:
    run = AdmittedRun.model_validate(stored_row(publication_id="pub_9", publication_version=1, later_column=1))
    shown = run.to_contract()
    assert shown.publication is not None and (shown.publication.id, shown.publication.version) == ("pub_9", 1)
    assert shown.stats.steps == 7 and shown.lease_state is None and shown.catalog == run.catalog
