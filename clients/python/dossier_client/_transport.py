"""Sending one request: where to, with which token, 429 and 503 `overloaded` retried after `Retry-After`,
and every other failure raised as a `DossierError`."""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from dossier_client.errors import DossierError, Unreachable, error_of

DEFAULT_URL = "http://127.0.0.1:8080"
# A finish waits for the claims check (the gateway allows it 60 seconds): a client must wait longer.
DEFAULT_TIMEOUT = 90.0
RETRIES = 5
# When the answer gives no usable Retry-After: the first wait, doubled each time, and the longest one.
FIRST_WAIT, LONGEST_WAIT = 0.5, 30.0


@dataclass
class Request:
    """One call of the API: what to send and what to expect back."""

    method: str
    path: str
    params: dict[str, Any] | None = None
    json: Any = None
    content: str | bytes | None = None
    files: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def kwargs(self) -> dict[str, Any]:
        sent: dict[str, Any] = {"headers": self.headers}
        if self.params is not None:
            sent["params"] = {k: v for k, v in self.params.items() if v is not None}
        for name in ("json", "content", "files", "data"):
            value = getattr(self, name)
            if value is not None:
                sent[name] = value
        return sent


def settings(url: str | None, token: str | None) -> tuple[str, str]:
    """The gateway's URL and the bearer token: as given, else DOSSIER_URL and DOSSIER_TOKEN."""
    found = token or os.environ.get("DOSSIER_TOKEN")
    if not found:
        raise ValueError("a token is needed: pass token= or set DOSSIER_TOKEN")
    return (url or os.environ.get("DOSSIER_URL") or DEFAULT_URL).rstrip("/"), found


def http_options(url: str, token: str, timeout: float) -> dict[str, Any]:
    return {"base_url": url, "headers": {"Authorization": f"Bearer {token}"}, "timeout": timeout}


def retry_wait(response: httpx.Response, attempt: int) -> float | None:
    """How long to wait before sending again, or None when this answer is final. A 429 is not counted
    against the token's work: the request was not done, so sending it again is safe for any method."""
    if response.status_code == 429 or (response.status_code == 503 and _code(response) == "overloaded"):
        if attempt >= RETRIES:
            return None
        told = _retry_after(response.headers.get("Retry-After"))
        return min(FIRST_WAIT * 2**attempt if told is None else told, LONGEST_WAIT)
    return None


def _code(response: httpx.Response) -> str | None:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


def _retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds: a number of seconds, or an HTTP date."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def answer(response: httpx.Response) -> Any:
    """The body of a success (JSON, text, or None for 204), or the error raised."""
    if response.status_code >= 400:
        raise error_of(response)
    if response.status_code == 204 or not response.content:
        return None
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    return response.text


def send(http: httpx.Client, request: Request) -> Any:
    for attempt in range(RETRIES + 1):
        try:
            response = http.request(request.method, request.path, **request.kwargs())
        except httpx.TransportError as exc:
            raise Unreachable(0, "unreachable", f"{request.method} {request.path}: {exc!r}") from exc
        wait = retry_wait(response, attempt)
        if wait is None:
            return answer(response)
        time.sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover - the last attempt always answers


async def send_async(http: httpx.AsyncClient, request: Request) -> Any:
    for attempt in range(RETRIES + 1):
        try:
            response = await http.request(request.method, request.path, **request.kwargs())
        except httpx.TransportError as exc:
            raise Unreachable(0, "unreachable", f"{request.method} {request.path}: {exc!r}") from exc
        wait = retry_wait(response, attempt)
        if wait is None:
            return answer(response)
        await asyncio.sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["DossierError", "Request", "answer", "send", "send_async", "settings"]
