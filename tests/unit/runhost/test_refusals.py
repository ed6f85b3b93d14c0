"""Every size refusal a model can meet names the size it sent and the limit, so it can tell how far to
shorten: the run's own tools (answered back to the model), its tools' arguments, its working files, and
the bus's and the gateway's words for a length over a contract's bound (what an outside agent reads)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from pydantic import BaseModel, Field, ValidationError

from services.runhost.memory import MAX_FILE_CHARS, RunFiles
from services.runhost.policies.vocabulary import ToolCall
from services.runhost.tools import MAX_DRAFT_CHARS, MAX_PLAN_CHARS, ToolBox
from shared.bus import validation_details
from shared.errors import Invalid, plain_problem


def toolbox() -> ToolBox:
    # A refusal of size comes before any file, ledger or owner is touched.
    nothing: Any = None
    return ToolBox(actor=nothing, grant="", catalog=nothing, files=nothing, ledger=nothing, owners=nothing)


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        (
            "write_note",
            {"source": "s", "text": "x" * 200_000},
            "error: invalid: the note is too long: 200,000 characters, the limit is 20,000",
        ),
        (
            "write_draft",
            {"text": "x" * (MAX_DRAFT_CHARS + 1)},
            "error: invalid: the draft is too long: 200,001 characters, the limit is 200,000",
        ),
        (
            "update_plan",
            {"text": "x" * (MAX_PLAN_CHARS * 2)},
            "error: invalid: the plan is too long: 131,072 characters, the limit is 65,536",
        ),
        (
            "search_evidence",
            {"query": "q" * 2500},
            "error: bad arguments for search_evidence: query: too long: 2,500 characters, the limit is 2,000",
        ),
        (
            "write_note",
            {"source": "s" * 121, "text": "t"},
            "error: bad arguments for write_note: source: too long: 121 characters, the limit is 120",
        ),
    ],
)
async def test_a_tool_refusal_of_size_names_the_size_sent_and_the_limit(
    tool: str, arguments: dict[str, Any], said: str
) -> None:
    result, inclusions = await toolbox().execute(ToolCall(tool, arguments, call_id="c1"))
    assert (result.ok, result.text, result.call_id, inclusions) == (False, said, "c1", [])


async def test_a_working_file_over_its_limit_is_refused_with_both_sizes() -> None:
    nothing: Any = None
    files = RunFiles(nothing, nothing, nothing, "run_1", 1)
    with pytest.raises(Invalid) as refused:
        await files.write("sources/big.txt", "x" * (MAX_FILE_CHARS + 5))
    assert refused.value.message == (
        "sources/big.txt (a run's working file) is too long: 4,194,309 characters, the limit is 4,194,304"
    )
    assert refused.value.details == {"limit": MAX_FILE_CHARS, "size": MAX_FILE_CHARS + 5}


class Bounded(BaseModel):
    answer: str = Field(default="", max_length=10)
    questions: list[str] = Field(default_factory=list, max_length=2)
    data: bytes = Field(default=b"", max_length=3)
    version: int = Field(default=1, ge=1)


@pytest.mark.parametrize(
    ("given", "field", "problem"),
    [
        ({"answer": "a" * 25}, "answer", "too long: 25 characters, the limit is 10"),
        ({"questions": ["q"] * 3}, "questions", "too long: 3 items, the limit is 2"),
        ({"data": b"abcd"}, "data", "too long: 4 bytes, the limit is 3"),
        ({"version": 0}, "version", "must be at least 1"),
    ],
)
def test_a_contract_length_over_its_bound_is_worded_with_the_length_sent(
    given: dict[str, Any], field: str, problem: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Bounded.model_validate(given)
    assert plain_problem(caught.value.errors()[0]) == problem
    assert validation_details(caught.value) == {"field": field, "problem": problem}


class LostFiles:
    """Run files whose database session closed under the call, as asyncpg says it outside a transaction."""

    async def write(self, path: str, text: str) -> None:
        raise asyncpg.InterfaceError("cannot call Connection.fetchrow(): connection has been released back to the pool")


async def test_a_lost_database_session_is_the_workers_business_not_the_models() -> None:
    nothing: Any = None
    files: Any = LostFiles()
    box = ToolBox(actor=nothing, grant="", catalog=nothing, files=files, ledger=nothing, owners=nothing)
    with pytest.raises(asyncpg.InterfaceError):
        await box.execute(ToolCall("write_draft", {"text": "draft"}, call_id="c1"))
