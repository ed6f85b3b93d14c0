"""Replies that are no usable step, answered back to the model, and the caps on a model that goes round.

Only `finish` finishes a run. A reply of text without a tool call (a model narrating its plan, a server
without a tool-call parser), a reply cut at `length`, one stopped by `content_filter` and an empty one
each come back to the model as a message saying what happened, so it can call a tool. A deterministic
model can repeat the same failing step forever; the same failure `limit` times in a row ends the run.
A model can also read again what it already has, forever: each such read is answered with what it read and
a word that it is a re-read (`Rereads`), and a number of them in a row ends the run at `max_rereads`.
"""

from __future__ import annotations

import hashlib
import json

from services.runhost.policies.base import PolicyError
from services.runhost.policies.vocabulary import ToolCall, ToolResult
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


# The tools that only read: called again with the same arguments and answered the same, nothing was learnt.
READS = frozenset({"list_catalog", "search_evidence", "read_publication", "read_evidence", "read_file"})
# The tools that write, and the file each writes: a write that changes its file is progress.
WRITES = {"write_note": None, "write_draft": "draft.md", "update_plan": "plan.md"}


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class Rereads:
    """Reads in a row that brought nothing new: the same read call answered with the same text as an earlier
    one of the run. A new read, or a write that changes a file, ends the row; a failed call or a write of what
    a file already holds leaves it as it is (a model alternating a re-read with either is still in a loop)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.in_a_row = 0
        self._seen: set[str] = set()
        self._written: dict[str, str] = {}

    def replay(self, transcript: list[ToolResult]) -> None:
        """The results of earlier attempts (the model-call journal's), judged again as they were."""
        for result in transcript:
            self._judge(result)

    def see(self, result: ToolResult) -> None:
        """Judge one result; a re-read is told so, ahead of what it read."""
        if self._judge(result):
            left = self.limit - self.in_a_row
            ending = "the run ends now" if left <= 0 else f"{left} more like it in a row end the run"
            result.text = (
                f"(already read: this call answered the same earlier in the run; {ending}. Read something"
                f" new, write a note or a draft, or finish)\n{result.text}"
            )

    @property
    def looping(self) -> bool:
        return self.in_a_row >= self.limit

    def _judge(self, result: ToolResult) -> bool:
        if not result.ok:
            return False
        if result.tool in READS:
            # Kept with the result, so a resumed run judges its journaled results by what they first read.
            key = result.data.setdefault("read_key", _digest(result.tool, result.arguments, result.text))
            if key in self._seen:
                self.in_a_row += 1
                return True
            self._seen.add(key)
            self.in_a_row = 0
        elif result.tool in WRITES:
            path = WRITES[result.tool] or f"notes/{result.arguments.get('source')}.md"
            text = _digest(result.arguments.get("text"))
            if self._written.get(path) != text:
                self._written[path] = text
                self.in_a_row = 0
        return False
