"""A streamed reply (`chat.completion.chunk` events) assembled into the body a non-streamed reply has.

Content arrives in pieces, each tool call as fragments keyed by its `index` (its id and name usually in
the first, its arguments spread over many), `finish_reason` in a late chunk and usage, when asked for with
`stream_options.include_usage`, in a last chunk without choices. Assembled, the reply goes through the
same mending and typing as a whole one (`completion_from_reply`), so every rule after it is the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

# A stream that never ends is cut by the request's deadline; one that never stops sending is bounded here.
MAX_STREAM_CHARS = 4_000_000


class StreamTooLong(Exception):
    pass


class Assembly:
    """The pieces of one streamed reply so far (only the first choice is used, as in a whole reply)."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.head: dict[str, Any] = {}
        self.chars = 0
        self.choices = 0  # chunks that carried the first choice

    def add(self, chunk: dict[str, Any]) -> None:
        for key in ("id", "created", "model"):
            if key in chunk and key not in self.head:
                self.head[key] = chunk[key]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self.choices += 1
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(delta)
        if self.chars > MAX_STREAM_CHARS:
            raise StreamTooLong(f"a streamed reply over {MAX_STREAM_CHARS:,} characters")

    def _delta(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
            self.chars += len(delta["content"])
        for n, fragment in enumerate(delta.get("tool_calls") or []):
            if not isinstance(fragment, dict):
                continue
            index = fragment.get("index")
            call = self.calls.setdefault(
                index if isinstance(index, int) else n, {"id": "", "name": "", "arguments": ""}
            )
            if fragment.get("id") and not call["id"]:
                call["id"] = str(fragment["id"])
            function = fragment.get("function")
            if isinstance(function, dict):
                if function.get("name") and not call["name"]:
                    call["name"] = str(function["name"])
                if isinstance(function.get("arguments"), str):
                    call["arguments"] += function["arguments"]
                    self.chars += len(function["arguments"])

    def reply(self) -> dict[str, Any]:
        """The wire-format body of the whole reply."""
        calls = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(self.calls.items())
        ]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if calls:
            message["tool_calls"] = calls
        body: dict[str, Any] = dict(self.head, object="chat.completion")
        body["choices"] = [{"index": 0, "message": message, "finish_reason": self.finish_reason}]
        if self.usage is not None:
            body["usage"] = self.usage
        return body


async def assemble(chunks: AsyncIterable[Any], assembly: Assembly | None = None) -> Assembly:
    """The assembly of a whole stream of the SDK's chunk objects (into `assembly`, which keeps what came
    when the stream breaks)."""
    assembly = Assembly() if assembly is None else assembly
    async for chunk in chunks:
        assembly.add(chunk.to_dict() if hasattr(chunk, "to_dict") else dict(chunk))
    return assembly
