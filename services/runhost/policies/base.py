"""The one interface every policy implements, and the tool schemas it may call (`TOOLS`, written from the
tools' argument models in services/runhost/tool_args.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass as checked_dataclass

from services.runhost.tool_args import TOOLS as TOOLS
from shared.contracts.runhost import HistoryRef
from shared.contracts.workspace import Catalog

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


@checked_dataclass(config=ConfigDict(arbitrary_types_allowed=True))
class RunView:
    """The structured view of a run that a policy may rely on besides the messages (its frozen admission
    checked into the contract's models)."""

    run_id: str
    goal_version: int
    goal: str
    question: str
    catalog: Catalog
    history: list[HistoryRef]
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
