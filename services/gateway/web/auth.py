"""Sign-in with an API token, sign-out, and the root page."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from services.gateway.tokens import TokenService, token_digest
from services.gateway.web.render import WebRoute, error_page, go, render
from services.gateway.web.security import (
    PRESESSION_COOKIE,
    SESSION_COOKIE,
    check_csrf,
    clear_session,
    count_against_rate,
    session_actor,
    sessions_of,
    set_session,
)
from shared.errors import Unauthenticated

router = APIRouter(route_class=WebRoute, include_in_schema=False)


def _local(target: str | None) -> str:
    """Only a path of this site may be the target after sign-in (never `//host` or a scheme)."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/workspaces"


# What the token service says, as a person signing in reads it.
SIGN_IN_MESSAGES = {
    "the bearer token is malformed": "That is not a Dossier token. A token starts with dsk_: paste it whole, "
    "as you were given it.",
    "the bearer token is not known": "That token is not known here. Check that you pasted it whole, or ask "
    "for a new one.",
    "the bearer token was revoked": "That token was revoked. Ask for a new one.",
    "the bearer token has expired": "That token has expired. Ask for a new one.",
}


def _friendly(message: str) -> str:
    return SIGN_IN_MESSAGES.get(message, message)


@router.get("/")
async def index(request: Request) -> Response:
    return RedirectResponse("/workspaces" if await session_actor(request) else "/signin", status_code=303)


@router.get("/signin")
async def signin_page(request: Request, next: str | None = None) -> Response:
    if await session_actor(request):
        return RedirectResponse(_local(next), status_code=303)
    return render(request, "signin.html", next=_local(next))


@router.post("/signin")
async def signin(request: Request) -> Response:
    form = await request.form()
    check_csrf(request, request.cookies.get(PRESESSION_COOKIE), form.get("csrf"))
    request.state.binding = request.cookies.get(PRESESSION_COOKIE)
    token = str(form.get("token") or "").strip()
    target = _local(str(form.get("next") or ""))
    tokens: TokenService = request.app.state.tokens
    try:
        if not token:
            raise Unauthenticated("enter a token")
        if tokens.is_admin(token):
            raise Unauthenticated("the admin token cannot sign in to the workbench; use a scope's token")
        await tokens.resolve(token)
    except Unauthenticated as exc:
        return render(request, "signin.html", status=401, next=target, error=_friendly(exc.message))
    # Each sign-in opens a session: signing in again and again is held to the token's rate.
    count_against_rate(request, token_digest(token))
    response = go(target)
    set_session(request, response, await sessions_of(request).open(token))
    return response


@router.post("/signout")
async def signout(request: Request) -> Response:
    form = await request.form()
    if await session_actor(request) is None:
        return go("/signin")
    check_csrf(request, getattr(request.state, "binding", None), form.get("csrf"))
    await sessions_of(request).close(request.cookies.get(SESSION_COOKIE, ""))
    response = go("/signin", "You are signed out.")
    clear_session(request, response)
    return response


def not_found_page(request: Request) -> Response:
    return error_page(request, "not_found", "there is no page here")
