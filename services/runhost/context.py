"""The model's context at one step: the task, a window of recent steps, and plan.md recited last."""

from __future__ import annotations

import json
import re
from typing import Any

from services.runhost.admitted import AdmittedRun
from services.runhost.policies.vocabulary import RunView, ToolResult

# The model's input is bounded whatever the run reads: the task carries counts and pointers (never the
# listing of working files), plan.md is recited by its active part (the sources still to do; the rest stays
# on file), and the window keeps the most recent steps up to CONTEXT_CHARS, each tool answer at most
# RESULT_CHARS with a pointer to the rest. MAX_INPUT_CHARS bounds the whole request's message text.
MAX_INPUT_CHARS = 2_800
CONTEXT_CHARS = 1_300
RESULT_CHARS = 1_100
# A tool answer longer than CUT_FLOOR is kept whole in the run's files when its step runs (`result_file`), so
# wherever the window cuts it, the cut ends with the file and the offset of the rest; a shorter one is never
# cut. A page of read_file is in its own file already: its cut points to the offset there.
CUT_FLOOR = 400
RESULTS = "results"
RECENT_STEPS = 12
# The goal and the question are the user's, and can be long: the task quotes their start, plan.md has them whole.
FIELD_CHARS = 240
PLAN_CHARS = 700
SECTION_CHARS = 240
PENDING_SHOWN = 3
# A long argument (a note or a draft the model wrote) is already in a file; the context keeps its size.
ARGUMENT_CHARS = 200
SYSTEM_PROMPT = (
    "You are a research agent working toward a long-running goal. Earlier publications describe what was"
    " concluded then; new evidence is dated by its source version; keep them apart. Read only through the"
    " tools; your context holds counts and pointers, read bodies back with read_file. Write one note per"
    " source in notes/, a draft in draft.md, then call finish with a markdown answer in three parts: 'What"
    " earlier reports concluded' (id@version, date), 'What the new evidence says' (source@version locator),"
    " 'Not resolved or not read'. Only finish ends the run."
)
_ENTRY = re.compile(r"^- (?P<name>\S+) :: ")


def initial_plan(run: AdmittedRun) -> str:
    history = "\n".join(f"- publication {h.publication_id}@{h.version} (selected)" for h in run.history)
    return (
        f"# Plan of run {run.id}\n\n## Goal (v{run.goal_version})\n{run.goal_text}\n\n"
        f"## Question\n{run.question}\n\n## Selected history\n{history or '(none)'}\n\n"
        "## Sources\n(to be chosen)\n\n## Next steps\n- list the catalog and search the evidence\n"
    )


def build_messages(view: RunView, transcript: list[ToolResult]) -> list[dict[str, Any]]:
    catalog = view.catalog
    task = (
        f"Goal (version {view.goal_version}): {_clip(view.goal, FIELD_CHARS)}\n"
        f"Question: {_clip(view.question, FIELD_CHARS)}\n"
        f"Catalog frozen at admission: {len(catalog.items)} items"
        f" ({'complete' if catalog.complete else str(catalog.omitted) + ' more on later pages'});"
        " call list_catalog (it writes catalog.md; a page ends with the cursor of the next).\n"
        f"Checkpoint revision: {view.checkpoint_revision} (a checkpoint_proposal applies against it).\n"
        f"Working files: {files_summary(view.files)}"
    )
    head: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task}]
    tail = [{"role": "user", "content": f"Current plan (plan.md, recited):\n{recite(view.plan, view.files)}"}]
    room = MAX_INPUT_CHARS - input_chars(head) - input_chars(tail)
    budget = min(CONTEXT_CHARS, room)
    kept: list[list[dict[str, Any]]] = []
    for result in reversed(transcript[-RECENT_STEPS:]):
        arguments = json.dumps(shown_arguments(result.arguments))
        text = shown_text(result)
        if len(text) + len(arguments) > budget:
            if kept:
                break
            # The latest step is always shown, cut to what is left, so the model sees what its call did.
            text = shown_text(result, max(budget - len(arguments), min(len(result.text), CUT_FLOOR)))
        budget -= len(text) + len(arguments)
        kept.append(_turn(result, arguments, text))
    return [*head, *(m for pair in reversed(kept) for m in pair), *tail]


def files_summary(files: dict[str, int]) -> str:
    """Counts per folder and the few top-level files by name: the listing itself grows with the work."""
    top = [f"{path} ({size:,} bytes)" for path, size in sorted(files.items()) if "/" not in path]
    folders = []
    for folder in ("sources", "notes"):
        sizes = [size for path, size in files.items() if path.startswith(folder + "/")]
        folders.append(f"{folder}/: {len(sizes)} files, {sum(sizes):,} bytes")
    done = {path[6:-3] for path in files if path.startswith("notes/")}
    todo = sum(1 for path in files if path.startswith("sources/") and path[8:-4] not in done)
    return f"{', '.join(top) or '(none yet)'}; {'; '.join(folders)}; {todo} sources read without a note"


def recite(plan: str, files: dict[str, int]) -> str:
    """The plan's active part: each section's start, and of the source list only the entries without a note
    (the first few, then counts); the whole plan stays in plan.md."""
    parts = re.split(r"(?m)^(?=## )", plan)
    out = []
    for part in parts:
        title, _, body = part.partition("\n")
        if title.strip() == "## Sources":
            names = [m["name"] for line in body.splitlines() if (m := _ENTRY.match(line.strip()))]
            if names:
                pending = [line.strip() for line in body.splitlines() if _pending(line.strip(), files)]
                shown = "\n".join(pending[:PENDING_SHOWN])
                counts = (
                    f"({len(names) - len(pending)} of {len(names)} noted, {len(pending)} to go; full list in plan.md)"
                )
                part = f"{title}\n{shown}\n{counts}\n\n" if shown else f"{title}\n{counts}\n\n"
        out.append(_clip(part, SECTION_CHARS, "(more in plan.md)\n\n"))
    return _clip("".join(out), PLAN_CHARS, f"(plan.md has {len(plan):,} chars; read_file plan.md for the rest)")


def _pending(line: str, files: dict[str, int]) -> bool:
    match = _ENTRY.match(line)
    return match is not None and f"notes/{match['name']}.md" not in files


def _clip(text: str, limit: int, more: str = "") -> str:
    if len(text) <= limit:
        return text
    marker = more or f"… [{len(text) - limit:,} more chars]"
    return text[: max(limit - len(marker), 0)] + marker


def result_file(result: ToolResult, step: int) -> str | None:
    """Where the loop keeps the whole answer of the run's `step`-th tool call, if the window may cut it."""
    if len(result.text) <= CUT_FLOOR or (result.tool == "read_file" and result.ok):
        return None
    return f"{RESULTS}/{step:04d}.md"


def shown_text(result: ToolResult, limit: int = RESULT_CHARS) -> str:
    """A tool answer as the window shows it: at most `limit` characters, a cut one ending with where the rest
    is (the marker names the offset the shown part ends at, so it is measured at the longest first). What a
    resume rebuilds the window from, so an ended run's journal keeps this (services/runhost/journal.py)."""
    text = result.text
    if len(text) <= limit:
        return text
    shown = max(limit - len(_marker(result, limit)), 0)
    return text[:shown] + _marker(result, shown)


def _marker(result: ToolResult, shown: int) -> str:
    data, where = result.data, ""
    if isinstance(data.get("result_path"), str):
        where = f"; read_file {data['result_path']} offset {shown} for the rest"
    elif result.tool == "read_file" and result.ok and isinstance(data.get("path"), str):
        # The answer is a header line, then the page from `offset`.
        header = result.text.find("\n") + 1
        where = f"; read_file {data['path']} offset {int(data.get('offset', 0)) + max(shown - header, 0)} for the rest"
    elif isinstance(data.get("path"), str):
        where = f"; read_file {data['path']} for the rest"
    return f"… [{len(result.text):,} chars in all{where}]"


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


def shown_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
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
