"""Drives any OpenAI-compatible `/v1/chat/completions` endpoint with tool calling (streaming off).

A 429 or a 5xx is retried with exponential backoff (honouring Retry-After); a tool call whose arguments
are not a JSON object is handed to the tools as malformed, so the error is answered back to the model.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from services.runhost.policies.base import ModelInput, ToolCall

MALFORMED = "__malformed_arguments__"


class PolicyError(Exception):
    """The model endpoint could not produce a next step; the run fails with this reason."""


class OpenAIPolicy:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        max_retries: int = 5,
        backoff_seconds: float = 0.5,
        timeout: float = 120.0,
    ):
        if not base_url or not model:
            raise PolicyError("the openai policy needs DOSSIER_OPENAI_BASE_URL and DOSSIER_OPENAI_MODEL")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.max_retries = max_retries
        self.backoff = backoff_seconds
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout

    async def next_step(self, model_input: ModelInput) -> ToolCall:
        body = {
            "model": self.model,
            "messages": model_input.messages,
            "tools": model_input.tools,
            "tool_choice": "auto",
            "stream": False,
        }
        reply = await self._complete(body)
        step = step_from_message(reply["choices"][0]["message"])
        usage = reply.get("usage")
        if isinstance(usage, dict):
            step.tokens_in = _count(usage.get("prompt_tokens"))
            step.tokens_out = _count(usage.get("completion_tokens"))
        return step

    async def _complete(self, body: dict[str, Any]) -> dict[str, Any]:
        delay = self.backoff
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            for attempt in range(self.max_retries + 1):
                try:
                    response = await client.post(self.url, json=body, headers=self._headers)
                except httpx.HTTPError as exc:
                    if attempt == self.max_retries:
                        raise PolicyError(f"the model endpoint is unreachable: {type(exc).__name__}") from exc
                    await asyncio.sleep(delay)
                    delay *= 2
                    continue
                if response.status_code == 429 or response.status_code >= 500:
                    if attempt == self.max_retries:
                        raise PolicyError(f"the model endpoint kept answering {response.status_code}")
                    await asyncio.sleep(_retry_after(response, delay))
                    delay *= 2
                    continue
                if response.status_code >= 400:
                    raise PolicyError(f"the model endpoint refused the request ({response.status_code})")
                try:
                    data = response.json()
                    data["choices"][0]["message"]
                except (ValueError, KeyError, IndexError, TypeError) as exc:
                    raise PolicyError("the model endpoint answered with an unexpected body") from exc
                return dict(data)
        raise PolicyError("unreachable")


def _retry_after(response: httpx.Response, default: float) -> float:
    try:
        return min(float(response.headers.get("retry-after", default)), 30.0)
    except ValueError:
        return default


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


def step_from_message(message: Any) -> ToolCall:
    """The next step from an assistant message of any shape an endpoint may send back."""
    if not isinstance(message, dict):
        raise PolicyError("the model endpoint answered with an unexpected message")
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        call: dict[str, Any] = calls[0] if isinstance(calls[0], dict) else {}
        function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
        raw = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):
            arguments = {MALFORMED: str(raw)[:2000]}
        return ToolCall(str(function.get("name") or ""), arguments, call_id=str(call.get("id") or ""))
    content = content_text(message.get("content")).strip()
    if content:
        return ToolCall("finish", {"answer": content}, call_id="final")
    # Answered back by the tools (a call without a name), so the model gets another chance.
    return ToolCall("", {}, call_id="empty")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
