"""Replies that are no usable step, answered back to the model, and the cap on a model that repeats one.

Only `finish` finishes a run. A reply of text without a tool call (a model narrating its plan, a server
without a tool-call parser), a reply cut at `length`, one stopped by `content_filter` and an empty one
each come back to the model as a message saying what happened, so it can call a tool. A deterministic
model can repeat the same failing step forever; the same failure `limit` times in a row ends the run.
"""

from __future__ import annotations

import json

from services.runhost.policies.base import PolicyError, ToolCall, ToolResult
from shared.metrics import MODEL_REPLIES_ANSWERED_BACK as ANSWERED_BACK

MESSAGES = {
    "narration": (
        "your reply was text without a tool call, so nothing ran and nothing was published. Only the finish"
        " tool ends the run: call a tool to go on, or call finish with your answer"
    ),
    "length": (
        "your reply was cut at the output limit (finish_reason: length), so it was not used. Send a shorter"
        " call: write long text in parts (write_note, write_draft) and finish with a shorter answer"
    ),
    "content_filter": (
        "your reply was stopped by the endpoint's content filter (finish_reason: content_filter), so it was"
        " not used. Rephrase, or call another tool"
    ),
    "empty": "your reply was empty (no text, no tool call). Call a tool, or call finish with your answer",
}


class RepeatedFailure(PolicyError):
    """The model sent the same failing step too many times in a row."""


def answer_back(call: ToolCall) -> ToolResult:
    """The tool result the model sees for a reply that was no usable step."""
    ANSWERED_BACK.labels(call.problem).inc()
    detail = MESSAGES.get(call.problem, "your reply could not be used")
    arguments = call.arguments if call.name else {"content": call.content}
    data = {"problem": call.problem}
    return ToolResult(call.name, arguments, f"error: {detail}", ok=False, data=data, call_id=call.call_id)


def failure_key(result: ToolResult) -> str | None:
    """What makes two failures the same: the problem's kind, or the tool with its exact arguments."""
    if result.ok:
        return None
    problem = result.data.get("problem")
    if problem:
        return f"reply:{problem}"
    return json.dumps([result.tool, result.arguments], sort_keys=True, default=str)


def check_repetition(transcript: list[ToolResult], limit: int) -> None:
    """Raise when the last `limit` results are the same failure."""
    if limit < 1 or len(transcript) < limit:
        return
    tail = transcript[-limit:]
    keys = {failure_key(result) for result in tail}
    if len(keys) != 1 or None in keys:
        return
    last = tail[-1]
    what = f"a reply with {last.data['problem']}" if last.data.get("problem") else f"the call {last.tool or '(none)'}"
    message = f"the model sent {what} {limit} times in a row, each answered with: {last.text[:300]}"
    raise RepeatedFailure(message)
