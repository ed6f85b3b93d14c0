"""The arguments of every tool, as pydantic models: a model's call is checked before any tool runs.

Models send wrong types (`"version": "x"`, `"query": null`, a list for a string); each of those must come
back to the model as a tool error it can correct, never as an exception that fails the run. The tool
schemas the policies send (`TOOLS`, OpenAI's function-tool shape) are written from these models: each
model's docstring is its tool's description, and each field shows the model its JSON type.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from services.runhost.admitted import Proposal
from shared.contracts.assets import SOURCE_ID_PATTERN
from shared.contracts.workspace import CURSOR_MAX_CHARS
from shared.errors import plain_problem


class Args(BaseModel):
    # Lax mode on purpose: "3" for an integer is what the model meant; "x" or null is refused.
    model_config = ConfigDict(extra="forbid")


class ListCatalogArgs(Args):
    """List the workspace's catalog frozen at admission (refs, titles, availability) into catalog.md, a page
    at a time: the analyst's sources and publications first, then earlier runs' conclusions. A page that is
    not the last ends with the cursor of the next; pass it as `cursor` to list that page."""

    cursor: str | None = Field(default=None, min_length=1, max_length=CURSOR_MAX_CHARS)


class ReadPublicationArgs(Args):
    """Read one exact version of an earlier publication; saves it to sources/ and returns a pointer."""

    id: str = Field(min_length=1, max_length=200)
    version: int = Field(ge=1)


class SearchEvidenceArgs(Args):
    """Full-text search over active source versions (all of them, or one source's) and, without source_id,
    over the workspace's earlier publications; each hit is marked [source] (read it with read_evidence)
    or [publication] (read it with read_publication). It also finds what the catalog omits. A page lists the
    passages first, then the publications; its first line gives the cursor of the next page."""

    query: str = Field(max_length=2000)
    source_id: str | None = Field(default=None, pattern=SOURCE_ID_PATTERN)
    cursor: str | None = Field(default=None, max_length=200)


class ReadEvidenceArgs(Args):
    """Read one evidence passage found by your search; saves it to sources/."""

    evidence_id: str = Field(min_length=1, max_length=200)


class ReadFileArgs(Args):
    """Read back part of one of your working files (bounded)."""

    path: str = Field(min_length=1, max_length=300)
    offset: int = 0
    limit: int = 8000


class WriteNoteArgs(Args):
    """Write the conclusion note of one source (marks the source done)."""

    source: str = Field(min_length=1, max_length=120)
    text: str


class WriteDraftArgs(Args):
    """Write the draft answer (draft.md)."""

    text: str


class UpdatePlanArgs(Args):
    """Replace plan.md (keep the goal, the question, the source list, the next steps)."""

    text: str


class FinishArgs(Args):
    """Finish with the answer (markdown) and optionally a checkpoint proposal."""

    answer: str
    # Checked later against the proposal's own model: an invalid proposal never fails the run. The model is
    # shown that model's fields.
    checkpoint_proposal: Annotated[dict[str, Any] | None, WithJsonSchema(Proposal.model_json_schema())] = None


ARGUMENTS: dict[str, type[Args]] = {
    "list_catalog": ListCatalogArgs,
    "read_publication": ReadPublicationArgs,
    "search_evidence": SearchEvidenceArgs,
    "read_evidence": ReadEvidenceArgs,
    "read_file": ReadFileArgs,
    "write_note": WriteNoteArgs,
    "write_draft": WriteDraftArgs,
    "update_plan": UpdatePlanArgs,
    "finish": FinishArgs,
}


def _shown(schema: dict[str, Any]) -> dict[str, Any]:
    """What the model is shown of one field: its JSON type (of an optional field, the type it may have),
    an array's items and an object's properties; the bounds are checked here and answered back."""
    options = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    (typed,) = options
    shown: dict[str, Any] = {"type": typed["type"]}
    if "items" in typed:
        shown["items"] = _shown(typed["items"])
    if "properties" in typed:
        shown["properties"] = {name: _shown(field) for name, field in typed["properties"].items()}
    return shown


def tool_schema(name: str, model: type[Args]) -> dict[str, Any]:
    """One tool as the OpenAI chat API takes it: a function named `name` whose parameters are `model`'s."""
    schema = model.model_json_schema()
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": " ".join(schema["description"].split()),
            "parameters": {
                "type": "object",
                "properties": {field: _shown(s) for field, s in schema.get("properties", {}).items()},
                "required": schema.get("required", []),
                "additionalProperties": False,
            },
        },
    }


TOOLS: list[dict[str, Any]] = [tool_schema(name, model) for name, model in ARGUMENTS.items()]


class BadArguments(Exception):
    """The call's arguments do not fit the tool's schema; the message is written for the model."""


A = TypeVar("A", bound=Args)


def parse_arguments(tool: str, arguments: dict[str, Any]) -> Args:
    return check_arguments(ARGUMENTS[tool], tool, arguments)


def check_arguments(model: type[A], tool: str, arguments: dict[str, Any]) -> A:
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = []
        for error in exc.errors()[:5]:
            where = ".".join(str(p) for p in error["loc"]) or "arguments"
            problems.append(f"{where}: {plain_problem(error)}")
        raise BadArguments(f"bad arguments for {tool}: " + "; ".join(problems)) from exc
