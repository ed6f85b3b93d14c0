"""Pure rules of the workspace service: questions, provenance, and when an association is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.workspace.associations import refusal
from services.workspace.checkpoint import BadProposal, check_provenance, provenance_refs, revise_questions
from shared.contracts.common import PublicationRef, Ref
from shared.contracts.workspace import DerivedFrom, Question

OPEN = [Question(id="q_1", text="one", status="open"), Question(id="q_2", text="two", status="open")]


def revise(current: list[Question], add: list[str] = [], resolve: list[str] = [], max_open: int = 5) -> list[Question]:  # noqa: B006
    return revise_questions(current, add=add, resolve=resolve, max_open=max_open, max_chars=20)


def test_questions_close_only_when_resolved_by_id() -> None:
    assert revise(OPEN) == OPEN
    after = revise(OPEN, add=["three"], resolve=["q_2"])
    assert [(q.id, q.status) for q in after[:2]] == [("q_1", "open"), ("q_2", "resolved")]
    assert after[2].text == "three" and after[2].status == "open" and after[2].id.startswith("q_")
    assert revise(after, resolve=["q_2"])[1].status == "resolved"  # resolving twice is harmless


@pytest.mark.parametrize(
    ("add", "resolve", "field"),
    [
        ([], ["q_9"], "resolve_questions"),
        ([" "], [], "add_questions"),
        (["x" * 21], [], "add_questions"),
        (["a", "b", "c", "d"], [], "add_questions"),  # 2 open + 4 new > 5
    ],
)
def test_bad_question_changes_are_refused(add: list[str], resolve: list[str], field: str) -> None:
    with pytest.raises(BadProposal) as err:
        revise(OPEN, add=add, resolve=resolve)
    assert err.value.field == field


def test_provenance_names_exact_checkable_versions() -> None:
    good = DerivedFrom(
        run_id="run_1",
        publication=PublicationRef(id="pub_1", version=2),
        sources=[Ref(kind="source", id="S1", version=3)],
    )
    check_provenance(good)
    assert [r.key() for r in provenance_refs(good)] == ["publication:pub_1@2", "source:S1@3"]
    for ref in (Ref(kind="evidence", id="ev_1", version=1), Ref(kind="source", id="S1", version=None)):
        with pytest.raises(BadProposal):
            check_provenance(DerivedFrom(sources=[ref]))


def test_association_refusals() -> None:
    archived_at = datetime(2026, 1, 2, tzinfo=UTC)
    active = {"status": "active", "archived_at": None}
    archived = {"status": "archived", "archived_at": archived_at}
    before = {"admitted_at": archived_at - timedelta(days=1)}
    assert refusal(None, None) == "workspace_not_found"
    assert refusal({"status": "deleted", "archived_at": None}, before) == "workspace_deleted"  # type: ignore[arg-type]
    assert refusal(active, None) is None  # type: ignore[arg-type]
    assert refusal(archived, before) is None  # type: ignore[arg-type]
    assert refusal(archived, None) == "workspace_archived"  # type: ignore[arg-type]
