"""HTTP client of the gateway for the CLI: where to connect, with which token, and every failure as a CliError.

The URL and the token come from `--url`/`--token` (recorded in OPTIONS by `commands.remember`),
else DOSSIER_URL / DOSSIER_TOKEN. Admin commands fall back to DOSSIER_ADMIN_TOKEN, then
`$DOSSIER_HOME/admin-token`, which `make up` writes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_URL = "http://127.0.0.1:8080"

EXIT_API = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """Printed as one line to stderr; the command exits with `exit_code`."""

    exit_code = EXIT_API

    def __init__(self, message: str, envelope: dict[str, Any] | None = None):
        super().__init__(message)
        self.envelope = envelope


class UsageProblem(CliError):
    exit_code = EXIT_USAGE


class Unreachable(CliError):
    exit_code = EXIT_UNREACHABLE


# The common options (`url`, `token`, `json`) as given anywhere on the command line; one command per process.
OPTIONS: dict[str, Any] = {}


def option(name: str) -> Any:
    return OPTIONS.get(name)


def wants_json() -> bool:
    return bool(option("json"))


def seg(value: str | int) -> str:
    """One path segment: an id can never add a segment or a query to the URL. No id holds a `/` (the
    server would read it as two segments), so one that does is a usage error named as such."""
    text = str(value)
    if "/" in text or not text.strip():
        raise UsageProblem(f"{text!r} is not an id: an id is one word, without '/'")
    return quote(text, safe="")


def file_path(path: str) -> str:
    """A run file's path as URL segments, each quoted (the server judges the path itself)."""
    return "/".join(quote(part, safe="") for part in path.split("/"))


def _admin_token() -> str:
    token = option("token") or os.environ.get("DOSSIER_ADMIN_TOKEN")
    if token:
        return str(token)
    path = Path(os.environ.get("DOSSIER_HOME") or ".dossier") / "admin-token"
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageProblem(
            f"no admin token: pass --token, set DOSSIER_ADMIN_TOKEN, or run where {path} is readable"
        ) from exc


def client(*, admin: bool = False, anonymous: bool = False) -> Client:
    url = option("url") or os.environ.get("DOSSIER_URL") or DEFAULT_URL
    if anonymous:
        token = ""
    elif admin:
        token = _admin_token()
    else:
        token = option("token") or os.environ.get("DOSSIER_TOKEN") or ""
        if not token:
            raise UsageProblem(
                "no token: pass --token or set DOSSIER_TOKEN (an admin issues one: dossier admin token create)"
            )
    return Client(str(url), str(token))


def _check_url(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise UsageProblem(f"the gateway URL {url!r} is not a URL") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UsageProblem(f"the gateway URL {url!r} must look like http://host:port")
    return url.rstrip("/")


class Client:
    def __init__(self, url: str, token: str, *, timeout: float = 60.0):
        self.url = _check_url(url)
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers=headers)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def raw(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request, whatever its status; a transport failure becomes a CliError."""
        try:
            return self._http.request(method, path, **kwargs)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise UsageProblem(f"the gateway URL {self.url!r} is not usable: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise Unreachable(f"the gateway at {self.url} did not answer in time") from exc
        except httpx.TransportError as exc:
            raise Unreachable(f"cannot reach the gateway at {self.url}: {exc}") from exc

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; an error reply becomes a CliError carrying the envelope's message."""
        response = self.raw(method, path, **kwargs)
        if response.status_code >= 400:
            raise api_error(response)
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.send(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:
            raise CliError(f"the gateway's reply to {method} {path} is not JSON (HTTP {response.status_code})") from exc

    def get(self, path: str, **params: Any) -> Any:
        return self.json("GET", path, params={k: v for k, v in params.items() if v is not None})

    def text(self, path: str) -> str:
        return self.send("GET", path).text

    def collect(self, path: str, **params: Any) -> dict[str, Any]:
        """A whole list: follows `next_cursor` when the route pages, else answers the one reply it got."""
        page = self._page(path, params)
        items = list(page["items"])
        cursor, seen = page.get("next_cursor"), set()
        while cursor:
            if cursor in seen:
                raise CliError(f"the gateway repeated a cursor while listing {path}")
            seen.add(cursor)
            following = self._page(path, {**params, "cursor": cursor})
            items.extend(following["items"])
            cursor = following.get("next_cursor")
        return {**page, "items": items} | ({"next_cursor": None} if "next_cursor" in page else {})

    def _page(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        page = self.get(path, **params)
        if not isinstance(page, dict) or not isinstance(page.get("items"), list):
            raise CliError(f"the gateway's reply to GET {path} is not a list")
        return page


def api_error(response: httpx.Response) -> CliError:
    try:
        envelope = response.json()
        error = envelope["error"]
        message = f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        reason = response.reason_phrase or "error"
        return CliError(f"HTTP {response.status_code} {reason} from the gateway (the reply is not an error envelope)")
    return CliError(message, envelope)
