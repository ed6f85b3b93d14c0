"""The words of the model loop (services/runhost/loop.py): the tool call a policy decides on, the result a tool
gives back, the run as a policy sees it, and the input of one model request."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from pydantic import ConfigDict
from pydantic.dataclasses import dataclass as checked_dataclass

from shared.contracts.runhost import HistoryRef, SourceRead
from shared.contracts.workspace import Catalog

# The arguments a tool call carried when they were not a JSON object (the model is told so).
MALFORMED = "__malformed_arguments__"


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


# The contract model a tool answers with, besides its text (services/runhost/tools.py).
ToolValue = Catalog | SourceRead
V = TypeVar("V", Catalog, SourceRead)


@dataclass
class ToolResult:
    """What a tool gave back, as the model sees it (`text`), plus its JSON for the loop, the journal and the
    policies (`data`), and the contract model the tool built it from (`value`), for a caller that answers
    with it (an outside agent's route). A result read back from the journal has its JSON only."""

    tool: str
    arguments: dict[str, Any]
    text: str
    ok: bool = True
    data: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""
    value: ToolValue | None = field(default=None, repr=False, compare=False)

    def value_as(self, kind: type[V]) -> V:
        """The tool's contract model, which the caller knows to be a `kind`."""
        if not isinstance(self.value, kind):
            raise TypeError(f"the tool {self.tool} answered no {kind.__name__}")
        return self.value

    def record(self) -> dict[str, Any]:
        """As the model-call journal keeps it: its JSON, without the contract model."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "value"}


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
    # The calls the run may still make before its max_steps limit stops it (None: not told).
    steps_left: int | None = None


@dataclass
class ModelInput:
    request_id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    view: RunView
