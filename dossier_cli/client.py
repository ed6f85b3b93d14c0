"""HTTP client of the gateway for the CLI: DOSSIER_URL and DOSSIER_TOKEN, errors as the envelope's message."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx


class CliError(Exception):
    """Printed as one line to stderr; the command exits non-zero."""


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, *, timeout: float = 60.0):
        self.url = (url or os.environ.get("DOSSIER_URL") or "http://127.0.0.1:8080").rstrip("/")
        self.token = token if token is not None else os.environ.get("DOSSIER_TOKEN", "")
        self._http = httpx.Client(base_url=self.url, timeout=timeout)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if not self.token:
            raise CliError("DOSSIER_TOKEN is not set (ask an admin for a token: POST /v1/admin/tokens)")
        headers = {"Authorization": f"Bearer {self.token}", **kwargs.pop("headers", {})}
        try:
            response = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach the gateway at {self.url}: {exc}") from exc
        if response.status_code >= 400:
            raise CliError(error_message(response))
        if response.status_code == 204 or not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def close(self) -> None:
        self._http.close()


def error_message(response: httpx.Response) -> str:
    try:
        error = response.json()["error"]
        return f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))
