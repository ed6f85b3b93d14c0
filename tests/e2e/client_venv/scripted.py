"""Scripted models for the example agents (run in the environment with the client's extras): no network,
the same choices every time, made from what the tools answered so far.

The script: search; read a missing id (the refusal is the tool's answer, and the agent goes on); read the
first passage and the first earlier publication found; keep a note; finish citing both; then say done.
Each model also keeps the tool schemas it was given, for the test to check.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agents import Model, ModelResponse, Usage
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from pydantic import Field

MISSING = "ev_missing_0"


def first_line(text: str) -> str:
    """The first sentence of a read's text, after its heading."""
    return text.split("\n\n", 1)[-1].strip().split("\n")[0].split(". ")[0].rstrip(".")


def next_call(query: str, results: Sequence[tuple[str, str]]) -> tuple[str, dict[str, Any]] | None:
    """The next tool call after `results` (tool name, what it answered), or None when the work is done."""
    done = [name for name, _ in results]
    if not results:
        return "search", {"query": query, "limit": 5}
    if "finish" in done:
        return None
    hits = json.loads(results[0][1])
    wanted = [MISSING]
    wanted += [h["read"] for h in hits if h["kind"] == "passage"][:1]
    wanted += [h["read"] for h in hits if h["kind"] == "publication"][:1]
    reads = [json.loads(out) for name, out in results if name == "read"]
    if len(reads) < len(wanted):
        return "read", {"ref": wanted[len(reads)]}
    passages = [r for r in reads if "cite" in r]
    if "write_note" not in done:
        note = "\n".join(f"- {first_line(p['text'])} ({p['cite']})" for p in passages)
        return "write_note", {"name": "findings", "text": note}
    answer = "\n".join(f"- {first_line(p['text'])} ({p['cite']})." for p in passages)
    return "finish", {"answer": answer, "title": "What changed for Fund X"}


# -- LangChain -----------------------------------------------------------------------------------------


def refusals(results: Sequence[tuple[str, str]]) -> list[Any]:
    """What the tools answered that is an error envelope (shown to the model, not raised)."""
    return [json.loads(out) for _, out in results if out.startswith('{"error"')]


class ScriptedChatModel(BaseChatModel):
    """A LangChain chat model that answers with the script's tool calls."""

    query: str
    schemas: dict[str, Any] = Field(default_factory=dict)
    seen: list[tuple[str, str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        for tool in tools:
            function = convert_to_openai_tool(tool)["function"]
            self.schemas[function["name"]] = function["parameters"]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        named: dict[str, str] = {}
        results: list[tuple[str, str]] = []
        for message in messages:
            if isinstance(message, AIMessage):
                named |= {call["id"]: call["name"] for call in message.tool_calls if call["id"]}
            elif isinstance(message, ToolMessage):
                results.append((named[message.tool_call_id], str(message.content)))
        self.seen = results
        call = next_call(self.query, results)
        if call is None:
            reply = AIMessage(content="Done: the answer is published.")
        else:
            tool_call = {"name": call[0], "args": call[1], "id": f"call_{len(results)}", "type": "tool_call"}
            reply = AIMessage(content="", tool_calls=[tool_call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


# -- OpenAI Agents SDK (its own tests fake a model the same way: a Model returning scripted outputs) ------


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


class ScriptedAgentsModel(Model):
    """An Agents SDK model that answers with the script's tool calls."""

    def __init__(self, query: str):
        self.query = query
        self.schemas: dict[str, Any] = {}
        self.seen: list[tuple[str, str]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *rest: Any, **kw: Any
    ) -> ModelResponse:
        self.schemas |= {tool.name: tool.params_json_schema for tool in tools}
        named: dict[str, str] = {}
        results: list[tuple[str, str]] = []
        for item in input if isinstance(input, list) else []:
            kind = _field(item, "type")
            if kind == "function_call":
                named[_field(item, "call_id")] = _field(item, "name")
            elif kind == "function_call_output":
                results.append((named[_field(item, "call_id")], str(_field(item, "output"))))
        self.seen = results
        call = next_call(self.query, results)
        output: list[Any]
        if call is None:
            text = ResponseOutputText(text="Done: the answer is published.", type="output_text", annotations=[])
            output = [
                ResponseOutputMessage(id="msg_1", content=[text], role="assistant", status="completed", type="message")
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    id=f"fc_{len(results)}",
                    call_id=f"call_{len(results)}",
                    name=call[0],
                    arguments=json.dumps(call[1]),
                    type="function_call",
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the examples do not stream")
