"""Drives any OpenAI-compatible `/v1/chat/completions` endpoint through the official `openai` SDK.

The SDK's own retries are off: its budget (a few attempts within seconds) fails a run on a one-minute
outage. Ours retries 429, 5xx, connection errors, timeouts and a 200 whose body is `{"error": ...}` with
exponential backoff and full jitter, honours Retry-After, and gives up only when the retry budget is spent
(`retries.py`: attempts, and time counted from the first failure, so a hung attempt leaves all of it),
logging the run id. Every attempt has a whole-request deadline, so a server that trickles bytes cannot hold
a run past it. A 200 with nothing usable in it (no choices) fails the request after a few, not the budget.

The reply is read, never guessed: `finish_reason` and the tool calls decide the step. A reply that is
not a usable tool call (narration, a `length` cut, `content_filter`, nothing at all) comes back as a
step with a `problem`, which the loop answers back to the model; it never becomes the answer.

With `stream` on, the request asks for server-sent events (`stream=True`, usage in the last chunk) and
the chunks are assembled into the body of a whole reply (`stream.py`) before any of the above, so a
streamed run takes the same steps, ledger, journal and stats. A cancel closes the stream between chunks.
A stream that breaks (or meets its deadline) after the chunk carrying `finish_reason` held a whole reply:
it is kept, without the usage of the missing last chunk, and not asked for again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion

from services.runhost.policies.base import PolicyError
from services.runhost.policies.retries import BudgetSpent, Retryable, RetryBudget, Unusable
from services.runhost.policies.stream import Assembly, StreamTooLong, assemble
from services.runhost.policies.vocabulary import MALFORMED, ModelInput, ToolCall

__all__ = ["MALFORMED", "OpenAIPolicy", "PolicyError"]

NARRATION_CHARS = 2_000
log = logging.getLogger("dossier.runhost.model")


class OpenAIPolicy:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 10.0,
        retry_seconds: float = 180.0,
        timeout: float = 120.0,
        max_attempts: int = 30,
        unusable_replies: int = 3,
        parallel_tool_calls: bool | None = None,
        stream: bool = False,
    ):
        if not base_url or not model:
            raise PolicyError("the openai policy needs DOSSIER_OPENAI_BASE_URL and DOSSIER_OPENAI_MODEL")
        self.model = model
        self.backoff, self.max_backoff = backoff_seconds, max_backoff_seconds
        self.retry_seconds, self.timeout = retry_seconds, timeout
        self.max_attempts, self.unusable_replies = max_attempts, unusable_replies
        self.parallel_tool_calls = parallel_tool_calls
        self.stream = stream
        # A local endpoint needs no key, but the SDK refuses to start without one.
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=0)

    async def close(self) -> None:
        await self.client.close()

    async def next_step(self, model_input: ModelInput) -> ToolCall:
        completion = await self._complete(model_input)
        step = step_from_completion(completion)
        if completion.usage is not None:
            step.tokens_in = _count(completion.usage.prompt_tokens)
            step.tokens_out = _count(completion.usage.completion_tokens)
        return step

    async def _complete(self, model_input: ModelInput) -> ChatCompletion:
        run_id = model_input.view.run_id
        budget = RetryBudget(
            self.backoff, self.max_backoff, self.retry_seconds, self.max_attempts, self.unusable_replies
        )
        while True:
            budget.attempt(time.monotonic())
            try:
                return await self._attempt(model_input)
            except Retryable as exc:
                try:
                    delay = budget.after(exc, time.monotonic())
                except BudgetSpent as spent:
                    log.warning("run %s: model endpoint given up: %s", run_id, spent)
                    raise spent from exc
                await asyncio.sleep(delay)
            except PolicyError as exc:
                log.warning("run %s: model endpoint refused the request: %s", run_id, exc)
                raise

    async def _attempt(self, model_input: ModelInput) -> ChatCompletion:
        assembly = Assembly()
        try:
            data = await self._reply(model_input, assembly)
        except Retryable as exc:
            if assembly.finish_reason is None:
                raise
            # The chunk with finish_reason ends the reply; what broke after it (the usage chunk, [DONE]) is
            # not worth paying for the whole reply again.
            log.info("run %s: a stream broke after its finish_reason, reply kept: %s", model_input.view.run_id, exc)
            data = assembly.reply()
        if not isinstance(data.get("choices"), list) or not data["choices"]:
            raise Unusable("a reply without choices")
        return completion_from_reply(data)

    async def _reply(self, model_input: ModelInput, assembly: Assembly) -> dict[str, Any]:
        """One request's reply body; a stream's chunks are added to `assembly` as they come."""
        try:
            # The SDK's timeout bounds each read; a server trickling bytes needs a deadline on the whole.
            async with asyncio.timeout(self.timeout):
                return await (self._streamed(model_input, assembly) if self.stream else self._whole(model_input))
        except TimeoutError as exc:
            raise Retryable(f"no whole reply within {self.timeout:.0f} s") from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 429 or exc.status_code >= 500:
                raise Retryable(f"HTTP {exc.status_code}", _retry_after(exc.response.headers)) from exc
            raise PolicyError(f"the model endpoint refused the request ({exc.status_code})") from exc
        except openai.APIConnectionError as exc:
            raise Retryable(f"unreachable ({type(exc).__name__})") from exc
        except openai.APIError as exc:
            # An `{"error": ...}` event inside a stream: the server failed after it had answered 200.
            raise Retryable(f"an error in the stream: {str(exc.message)[:200]}") from exc
        except httpx.HTTPError as exc:
            # A stream cut mid-way surfaces from the transport, not from the SDK's request.
            raise Retryable(f"the stream broke ({type(exc).__name__})") from exc
        except StreamTooLong as exc:
            raise Retryable(str(exc)) from exc

    def _arguments(self, model_input: ModelInput) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": model_input.messages,
            "tools": model_input.tools,
            "tool_choice": "auto",
            "timeout": self.timeout,
            "parallel_tool_calls": openai.omit if self.parallel_tool_calls is None else self.parallel_tool_calls,
        }

    async def _whole(self, model_input: ModelInput) -> dict[str, Any]:
        # The messages and tools are plain dicts of the wire format, not the SDK's TypedDicts.
        raw = await self.client.chat.completions.with_raw_response.create(stream=False, **self._arguments(model_input))
        try:
            data = json.loads(raw.text)
        except ValueError as exc:
            raise Unusable("a reply that is not JSON") from exc
        if not isinstance(data, dict):
            raise Unusable("a reply that is not a JSON object")
        if data.get("error") is not None:
            # Some servers (proxies, vLLM under load) report a failure inside a 200.
            raise Retryable(f"an error in a 200 reply: {str(data['error'])[:200]}", _retry_after(raw.headers))
        return data

    async def _streamed(self, model_input: ModelInput, assembly: Assembly) -> dict[str, Any]:
        stream = await self.client.chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **self._arguments(model_input)
        )
        # Closing the stream on the way out (a cancel, the deadline) drops the connection at once.
        async with stream:
            await assemble(stream, assembly)
        if assembly.choices == 0:
            raise Unusable("a stream without choices")
        if assembly.finish_reason is None:
            raise Retryable("a stream that ended without a finish_reason")
        return assembly.reply()


def _retry_after(headers: Any) -> float | None:
    try:
        value = headers.get("retry-after")
        return min(max(float(value), 0.0), 60.0) if value is not None else None
    except (TypeError, ValueError):
        return None


def completion_from_reply(data: dict[str, Any]) -> ChatCompletion:
    """The typed completion of a reply, after mending what compatible servers send in other shapes."""
    data = dict(data)
    data.setdefault("id", "")
    data.setdefault("created", 0)
    data.setdefault("model", "")
    data.setdefault("object", "chat.completion")
    choices = []
    for index, choice in enumerate(data.get("choices") or []):
        choice = dict(choice) if isinstance(choice, dict) else {}
        given = choice.get("message")
        message = dict(given) if isinstance(given, dict) else {}
        message["role"] = "assistant"
        message["content"] = content_text(message.get("content")) or None
        calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        message["tool_calls"] = [
            {
                "id": str(c.get("id") or f"call-{n}"),
                "type": "function",
                "function": {
                    "name": str((c.get("function") or {}).get("name") or ""),
                    "arguments": _arguments_text((c.get("function") or {}).get("arguments")),
                },
            }
            for n, c in enumerate(calls)
            if isinstance(c.get("function") or {}, dict)
        ] or None
        reason = choice.get("finish_reason")
        known = ("stop", "length", "tool_calls", "content_filter", "function_call")
        choices.append({"index": index, "message": message, "finish_reason": reason if reason in known else "stop"})
    data["choices"] = choices
    usage = data.get("usage")
    if not (
        isinstance(usage, dict) and all(isinstance(usage.get(k), int) for k in ("prompt_tokens", "completion_tokens"))
    ):
        data["usage"] = None
    elif not isinstance(usage.get("total_tokens"), int):
        data["usage"] = dict(usage, total_tokens=usage["prompt_tokens"] + usage["completion_tokens"])
    try:
        return ChatCompletion.model_validate(data)
    except ValueError as exc:
        raise PolicyError("the model endpoint answered with an unexpected body") from exc


def _arguments_text(raw: Any) -> str:
    if raw is None:
        return ""
    return raw if isinstance(raw, str) else json.dumps(raw)


def content_text(content: Any) -> str:
    """A message's content as text: a string, a list of content parts, or anything else printed."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in content]
        return "\n".join(p for p in parts if isinstance(p, str))
    return json.dumps(content) if isinstance(content, dict) else str(content)


def step_from_completion(completion: ChatCompletion) -> ToolCall:
    """The step of the first choice: its tool calls in order, or what went wrong, by finish_reason."""
    choice = completion.choices[0]
    message = choice.message
    reason = choice.finish_reason
    content = (message.content or "").strip()
    calls = [
        _call(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or [] if c.type == "function"
    ]
    if reason == "length":
        # A cut reply: a tool call's arguments are incomplete, text ends mid-sentence. Neither is used.
        first = calls[0] if calls else ToolCall("", {})
        return ToolCall(first.name, first.arguments, call_id=first.call_id, problem="length", content=content)
    if reason == "content_filter":
        return ToolCall("", {}, problem="content_filter", content=content)
    if calls:
        first, *rest = calls
        first.siblings = rest
        return first
    if content:
        return ToolCall("", {}, problem="narration", content=content[:NARRATION_CHARS])
    return ToolCall("", {}, problem="empty")


def _call(call_id: str, name: str, raw: str) -> ToolCall:
    try:
        arguments = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        arguments = {MALFORMED: str(raw)[:2000]}
    return ToolCall(name or "", arguments, call_id=call_id or "")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
