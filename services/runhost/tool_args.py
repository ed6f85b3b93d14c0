"""The arguments of every tool, as pydantic models: a model's call is checked before any tool runs.

Models send wrong types (`"version": "x"`, `"query": null`, a list for a string); each of those must come
back to the model as a tool error it can correct, never as an exception that fails the run. The models
mirror the JSON schemas in `policies.base.TOOLS` (a unit test keeps the two in step).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.contracts.assets import SOURCE_ID_PATTERN


class Args(BaseModel):
    # Lax mode on purpose: "3" for an integer is what the model meant; "x" or null is refused.
    model_config = ConfigDict(extra="forbid")


class NoArgs(Args):
    pass


class ReadPublicationArgs(Args):
    id: str = Field(min_length=1, max_length=200)
    version: int = Field(ge=1)


class SearchEvidenceArgs(Args):
    query: str = Field(max_length=2000)
    source_id: str | None = Field(default=None, pattern=SOURCE_ID_PATTERN)


class ReadEvidenceArgs(Args):
    evidence_id: str = Field(min_length=1, max_length=200)


class ReadFileArgs(Args):
    path: str = Field(min_length=1, max_length=300)
    offset: int = 0
    limit: int = 8000


class WriteNoteArgs(Args):
    source: str = Field(min_length=1, max_length=120)
    text: str


class TextArgs(Args):
    text: str


class FinishArgs(Args):
    answer: str
    # Checked later against the proposal's own model: an invalid proposal never fails the run.
    checkpoint_proposal: dict[str, Any] | None = None


ARGUMENTS: dict[str, type[Args]] = {
    "list_catalog": NoArgs,
    "read_publication": ReadPublicationArgs,
    "search_evidence": SearchEvidenceArgs,
    "read_evidence": ReadEvidenceArgs,
    "read_file": ReadFileArgs,
    "write_note": WriteNoteArgs,
    "write_draft": TextArgs,
    "update_plan": TextArgs,
    "finish": FinishArgs,
}


class BadArguments(Exception):
    """The call's arguments do not fit the tool's schema; the message is written for the model."""


def parse_arguments(tool: str, arguments: dict[str, Any]) -> Args:
    model = ARGUMENTS[tool]
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:5]:
            where = ".".join(str(p) for p in error["loc"]) or "arguments"
            problems.append(f"{where}: {error['msg']}")
        raise BadArguments(f"bad arguments for {tool}: " + "; ".join(problems)) from exc
