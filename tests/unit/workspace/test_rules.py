"""Pure rules of the workspace service: questions, provenance, and when an association is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.workspace.associations import refusal
from services.workspace.checkpoint import BadProposal, check_provenance, provenance_refs, revise_questions
from services.workspace.questions import answered_by_run, same_question
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


def test_a_question_already_open_is_not_asked_again() -> None:
    asked = revise(OPEN, add=["What is T+3?", "what is  T+3", "T+3: what is it?", "Two."])
    assert [q.text for q in asked] == ["one", "two", "What is T+3?"]
    # Numbers and one-letter words tell questions apart; a resolved question may be asked again.
    assert not same_question("Source v1 now has version 2?", "Source v1 now has version 3?")
    assert not same_question("Does Fund X gate?", "Does Fund Y gate?")
    closed = revise(OPEN, resolve=["q_1"])
    assert [q.text for q in revise(closed, add=["One?"])][-1] == "One?"


def test_a_later_run_resolves_what_it_was_asked_and_answered_and_drift_it_read() -> None:
    open_ = [
        Question(id="q_r", text="What did the regulator say about swing pricing?", status="open"),
        Question(id="q_d", text="“announcement” v1, cited by … now has version 2?", status="open"),
        Question(id="q_w", text="Why?", status="open"),
        Question(id="q_x", text="What did the regulator say?", status="resolved"),
    ]
    drift = {"q_d": Ref(kind="source", id="announcement", version=2)}
    asked = "What did the regulator say about swing pricing since March, and why?"

    def answered(question: str, left_open: list[str], used: set[str]) -> list[str]:
        return answered_by_run(open_, question=question, left_open=left_open, used=used, drift_refs=drift)

    assert answered(asked, [], set()) == ["q_r"]  # "Why?" says nothing: never resolved so
    assert answered(asked, ["What did the regulator say about swing pricing in March?"], set()) == []
    assert answered("What did the regulator say?", [], set()) == []  # asked only part of it
    assert answered("Anything new?", [], {"source:announcement@2"}) == ["q_d"]
    assert answered("Anything new?", [], {"source:announcement@1"}) == []
