"""The model's context at one step: the task, a window of recent steps, and plan.md recited last."""

from __future__ import annotations

import json
from typing import Any

from services.runhost.policies.base import RunView, ToolResult
from services.runhost.repository import RunRow

# The model's context is a window, not an archive: the most recent tool calls and results up to this many
# characters (arguments included), never more than RECENT_STEPS of them. Older work lives in the files and
# the recited plan, and bodies are read back on demand.
CONTEXT_CHARS = 8_000
RECENT_STEPS = 12
# A long argument (a note or a draft the model wrote) is already in a file; the context keeps its size.
ARGUMENT_CHARS = 200
SYSTEM_PROMPT = (
    "You are a research agent working toward a long-running goal. Earlier publications describe what was"
    " concluded then; new evidence is dated by its source version; keep the two apart. Read only through the"
    " tools. Your context holds pointers to your working files; read bodies back with read_file. Write one"
    " note per source in notes/, a draft in draft.md, then call finish with a markdown answer in three parts:"
    " 'What earlier reports concluded' (id@version and date), 'What the new evidence says' (source@version"
    " locator), and 'Not resolved or not read'. Only the finish tool ends the run: a reply without a tool call"
    " is not an answer."
)


def initial_plan(run: RunRow) -> str:
    history = "\n".join(f"- publication {h['publication_id']}@{h['version']} (selected)" for h in run["history"])
    return (
        f"# Plan of run {run['id']}\n\n## Goal (v{run['goal_version']})\n{run['goal_text']}\n\n"
        f"## Question\n{run['question']}\n\n## Selected history\n{history or '(none)'}\n\n"
        "## Sources\n(to be chosen)\n\n## Next steps\n- list the catalog and search the evidence\n"
    )


def build_messages(view: RunView, transcript: list[ToolResult]) -> list[dict[str, Any]]:
    files = "\n".join(f"- {path} ({size} bytes)" for path, size in sorted(view.files.items())) or "(none yet)"
    task = (
        f"Goal (version {view.goal_version}): {view.goal}\nQuestion: {view.question}\n"
        f"Catalog frozen at admission: {len(view.catalog['items'])} items"
        f" ({'complete' if view.catalog['complete'] else str(view.catalog['omitted']) + ' omitted'}); call list_catalog (it writes catalog.md).\n"
        f"Checkpoint revision: {view.checkpoint_revision} (a checkpoint_proposal applies against it).\n"
        f"Working files:\n{files}"
    )
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task}]
    budget = CONTEXT_CHARS
    kept: list[list[dict[str, Any]]] = []
    for result in reversed(transcript[-RECENT_STEPS:]):
        arguments = json.dumps(_shortened(result.arguments))
        text = result.text
        if len(text) + len(arguments) > budget:
            text = f"[elided: {len(result.text):,} chars; read files back]"
        budget -= len(text) + len(arguments)
        if budget < 0:
            break
        kept.append(_turn(result, arguments, text))
    for pair in reversed(kept):
        messages.extend(pair)
    messages.append({"role": "user", "content": f"Current plan (plan.md, recited):\n{view.plan}"})
    return messages


def _turn(result: ToolResult, arguments: str, text: str) -> list[dict[str, Any]]:
    """One step as the model sees it: its call and the tool's answer, or its reply and what happened to it."""
    if not result.tool:
        said = str(result.arguments.get("content") or "")[:ARGUMENT_CHARS]
        return [{"role": "assistant", "content": said}, {"role": "user", "content": text}]
    call = {"id": result.call_id, "type": "function", "function": {"name": result.tool, "arguments": arguments}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": result.call_id, "content": text},
    ]


def _shortened(arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        key: f"[{len(value):,} chars]" if isinstance(value, str) and len(value) > ARGUMENT_CHARS else value
        for key, value in arguments.items()
    }


def input_chars(messages: list[dict[str, Any]]) -> int:
    """The characters one model request carries: every message's text (the tool schemas are constant)."""
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        for call in message.get("tool_calls") or []:
            total += len(str((call.get("function") or {}).get("arguments") or ""))
    return total
