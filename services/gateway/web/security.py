"""The workbench's session cookie, its CSRF tokens and the headers every page is sent with.

The session cookie (HttpOnly, SameSite=Strict) holds a random session id, never the API token: the
gateway keeps which token a session stands for (services.gateway.sessions), and signing out deletes it.
A form's CSRF token is an HMAC of the session id (or, before sign-in, of a random pre-session cookie): a
page of another origin can neither read it nor compute it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from fastapi import Request, Response
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.sessions import SESSION_SECONDS, SessionService
from services.gateway.transport.admission import TokenBuckets
from shared.contracts.common import Actor
from shared.errors import RateLimited

SESSION_COOKIE = "dossier_session"
PRESESSION_COOKIE = "dossier_presession"

# No inline script or style anywhere: everything the pages run or style with is served from /static.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
PAGE_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
}
# The API and its own docs page keep their headers; everything else is the workbench.
API_PREFIXES = ("/v1/", "/docs", "/openapi.json", "/metrics", "/mcp")


class SignInRequired(Exception):
    pass


class CsrfRefused(Exception):
    pass


def _key(request: Request) -> bytes:
    secret: str = request.app.state.settings.admin_token
    return hashlib.sha256(b"dossier-web-csrf|" + secret.encode()).digest()


def csrf_token(request: Request, binding: str) -> str:
    return hmac.new(_key(request), binding.encode(), hashlib.sha256).hexdigest()


def check_csrf(request: Request, binding: str | None, sent: object) -> None:
    if not binding or not isinstance(sent, str) or not hmac.compare_digest(csrf_token(request, binding), sent):
        raise CsrfRefused


def sessions_of(request: Request) -> SessionService:
    sessions: SessionService = request.app.state.sessions
    return sessions


async def session_actor(request: Request) -> Actor | None:
    """The signed-in actor, or None; the session's token is checked on every request (expiry and
    revocation included)."""
    session_id = request.cookies.get(SESSION_COOKIE, "")
    if not session_id:
        return None
    resolved = await sessions_of(request).resolve(session_id)
    if resolved is None:
        return None
    actor, token_hash = resolved
    count_against_rate(request, token_hash)
    request.state.binding = session_id
    return actor


def count_against_rate(request: Request, token_hash: str) -> None:
    """A page or a sign-in counts against its token's rate like an API request (the same bucket:
    services.gateway.transport.limits); over it, `RateLimited`."""
    rates: TokenBuckets = request.app.state.rates
    retry_after = rates.take(token_hash)
    if retry_after:
        raise RateLimited("too many requests with this token; retry in a moment", retry_after=retry_after)


def presession(request: Request) -> str:
    """The pre-session value the sign-in form's CSRF token is bound to (set by `set_presession`)."""
    value = request.cookies.get(PRESESSION_COOKIE) or getattr(request.state, "new_presession", None)
    if not value:
        value = secrets.token_urlsafe(24)
        request.state.new_presession = value
    request.state.binding = value
    return value


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_presession(request: Request, response: Response) -> None:
    value = getattr(request.state, "new_presession", None)
    if value:
        response.set_cookie(
            PRESESSION_COOKIE, value, httponly=True, samesite="strict", secure=_secure(request), path="/"
        )


def set_session(request: Request, response: Response, session_id: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        secure=_secure(request),
        path="/",
    )
    response.delete_cookie(PRESESSION_COOKIE, path="/")


def clear_session(request: Request, response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict", secure=_secure(request))


class PageHeaders:
    """Adds the strict CSP and friends to every workbench response that does not set its own."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(API_PREFIXES):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in PAGE_HEADERS.items():
                    if name not in headers:
                        headers[name] = value
                if headers.get("content-type", "").startswith("text/html") and "cache-control" not in headers:
                    headers["cache-control"] = "no-store"
            await send(message)

        await self.app(scope, receive, with_headers)
