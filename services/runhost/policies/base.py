"""The one interface every policy implements, and the tool schemas it may call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# The arguments a tool call carried when they were not a JSON object (the model is told so).
MALFORMED = "__malformed_arguments__"


class PolicyError(Exception):
    """The model endpoint could not produce a next step; the run fails with this reason."""


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    call_id: str = ""
    # What the model's endpoint reported it used for this call, when it reports usage at all.
    tokens_in: int | None = None
    tokens_out: int | None = None
    # Answered from the model-call journal (an earlier attempt's answer to the same input), not by the model.
    replayed: bool = False
    # Set when the reply was no usable tool call ("narration", "length", "content_filter", "empty"): the
    # loop answers it back to the model instead of running it. `content` is the reply's text, if any.
    problem: str = ""
    content: str = ""
    # The further tool calls of the same reply (parallel tool calls), run after this one, in order.
    siblings: list[ToolCall] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        """JSON-ready, as the model-call journal keeps it."""
        return {
            "name": self.name,
            "arguments": self.arguments,
            "call_id": self.call_id,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "problem": self.problem,
            "content": self.content,
            "siblings": [s.record() for s in self.siblings],
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], *, replayed: bool = False) -> ToolCall:
        """A journaled step (older journal rows lack the later fields)."""
        return cls(
            name=record["name"],
            arguments=record["arguments"],
            call_id=record.get("call_id", ""),
            tokens_in=record.get("tokens_in"),
            tokens_out=record.get("tokens_out"),
            replayed=replayed,
            problem=record.get("problem", ""),
            content=record.get("content", ""),
            siblings=[cls.from_record(s) for s in record.get("siblings", [])],
        )

    def calls(self) -> list[ToolCall]:
        return [self, *self.siblings]


@dataclass
class ToolResult:
    """What a tool gave back, as the model sees it (`text`), plus structured data for policies."""

    tool: str
    arguments: dict[str, Any]
    text: str
    ok: bool = True
    data: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""


@dataclass
class RunView:
    """The structured view of a run that a policy may rely on besides the messages."""

    run_id: str
    goal_version: int
    goal: str
    question: str
    catalog: dict[str, Any]
    history: list[dict[str, Any]]
    files: dict[str, int]
    plan: str
    checkpoint_revision: int
    results: list[ToolResult]


@dataclass
class ModelInput:
    request_id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    view: RunView


class Policy(Protocol):
    async def next_step(self, model_input: ModelInput) -> ToolCall: ...


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_STR = {"type": "string"}
_INT = {"type": "integer"}

TOOLS: list[dict[str, Any]] = [
    _tool(
        "list_catalog",
        "List the workspace's catalog frozen at admission (refs, titles, availability) into catalog.md.",
        {},
        [],
    ),
    _tool(
        "read_publication",
        "Read one exact version of an earlier publication; saves it to sources/ and returns a pointer.",
        {"id": _STR, "version": _INT},
        ["id", "version"],
    ),
    _tool(
        "search_evidence",
        "Full-text search over active source versions (all of them, or one source's) and, without source_id,"
        " over the workspace's earlier publications; each hit is marked [source] (read it with read_evidence)"
        " or [publication] (read it with read_publication). It also finds what the catalog omits.",
        {"query": _STR, "source_id": _STR},
        ["query"],
    ),
    _tool(
        "read_evidence",
        "Read one evidence passage found by your search; saves it to sources/.",
        {"evidence_id": _STR},
        ["evidence_id"],
    ),
    _tool(
        "read_file",
        "Read back part of one of your working files (bounded).",
        {"path": _STR, "offset": _INT, "limit": _INT},
        ["path"],
    ),
    _tool(
        "write_note",
        "Write the conclusion note of one source (marks the source done).",
        {"source": _STR, "text": _STR},
        ["source", "text"],
    ),
    _tool("write_draft", "Write the draft answer (draft.md).", {"text": _STR}, ["text"]),
    _tool(
        "update_plan",
        "Replace plan.md (keep the goal, the question, the source list, the next steps).",
        {"text": _STR},
        ["text"],
    ),
    _tool(
        "finish",
        "Finish with the answer (markdown) and optionally a checkpoint proposal.",
        {
            "answer": _STR,
            "checkpoint_proposal": {
                "type": "object",
                "properties": {
                    "summary": _STR,
                    "add_questions": {"type": "array", "items": _STR},
                    "resolve_questions": {"type": "array", "items": _STR},
                    "expected_revision": _INT,
                },
            },
        },
        ["answer"],
    ),
]
TOOL_NAMES = {t["function"]["name"] for t in TOOLS}
